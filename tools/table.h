// Output for the attnkit program: an aligned text table for people, and JSON for scripts
// (bench/compare.py reads the JSON that `attnkit bench --json` writes).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace attnkit::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  // Columns padded to their widest cell; numeric-looking cells right-aligned.
  std::string render() const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Fixed-point formatting for table cells ("" for a NaN, so missing numbers print blank).
std::string fmt(double v, int decimals);
// About three significant digits in fixed-point form ("" for a NaN): rates from 0.001 to 1000s.
std::string fmt_rate(double v);
// Three significant digits in scientific form, for error metrics.
std::string fmt_sci(double v);

// A flat JSON object, keys in insertion order. NaN / inf numbers are written as null.
using JsonValue = std::variant<std::nullptr_t, bool, int64_t, double, std::string>;
class JsonObject {
 public:
  // One overload per type, so that no argument converts to an unintended one (double to int).
  JsonObject& set(const std::string& key, double v) { return put(key, v); }
  JsonObject& set(const std::string& key, int64_t v) { return put(key, v); }
  JsonObject& set(const std::string& key, int v) { return put(key, int64_t{v}); }
  JsonObject& set(const std::string& key, bool v) { return put(key, v); }
  JsonObject& set(const std::string& key, const std::string& v) { return put(key, v); }
  JsonObject& set(const std::string& key, const char* v) { return put(key, std::string(v)); }
  std::string str() const;

 private:
  JsonObject& put(const std::string& key, JsonValue v);
  std::vector<std::pair<std::string, JsonValue>> fields_;
};

// {"meta": {...}, "rows": [{...}, ...]}
std::string json_document(const JsonObject& meta, const std::vector<JsonObject>& rows);

std::string json_escape(const std::string& s);

}  // namespace attnkit::cli
