#include "table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace attnkit::cli {
namespace {

bool numeric(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
          c == 'e' || c == 'x'))
      return false;
  return std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '.';
}

}  // namespace

std::string Table::render() const {
  std::vector<size_t> w(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) w[c] = columns_[c].size();
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out;
    for (size_t c = 0; c < w.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(w[c] - std::min(w[c], cell.size()), ' ');
      const bool last = c + 1 == w.size();
      // The last column (status messages) is never padded, so long messages don't widen lines.
      if (last) out += cell;
      else out += (!header && numeric(cell) ? pad + cell : cell + pad) + "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    os << out << "\n";
  };
  line(columns_, true);
  std::vector<std::string> rule;
  for (size_t c = 0; c < w.size(); ++c) rule.push_back(std::string(w[c], '-'));
  line(rule, true);
  for (const auto& r : rows_) line(r, false);
  return os.str();
}

std::string fmt(double v, int decimals) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_rate(double v) {
  if (!std::isfinite(v)) return "";
  const double a = std::fabs(v);
  return fmt(v, a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : a >= 0.1 ? 3 : a >= 0.01 ? 4 : 5);
}

std::string fmt_sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

JsonObject& JsonObject::put(const std::string& key, JsonValue v) {
  for (auto& [k, old] : fields_)
    if (k == key) {
      old = std::move(v);
      return *this;
    }
  fields_.emplace_back(key, std::move(v));
  return *this;
}

std::string JsonObject::str() const {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto& [k, v] : fields_) {
    os << (first ? "" : ", ") << "\"" << json_escape(k) << "\": ";
    first = false;
    if (std::holds_alternative<std::nullptr_t>(v)) {
      os << "null";
    } else if (auto* b = std::get_if<bool>(&v)) {
      os << (*b ? "true" : "false");
    } else if (auto* i = std::get_if<int64_t>(&v)) {
      os << *i;
    } else if (auto* d = std::get_if<double>(&v)) {
      if (std::isfinite(*d)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g", *d);
        os << buf;
      } else {
        os << "null";
      }
    } else {
      os << "\"" << json_escape(std::get<std::string>(v)) << "\"";
    }
  }
  os << "}";
  return os.str();
}

std::string json_document(const JsonObject& meta, const std::vector<JsonObject>& rows) {
  std::ostringstream os;
  os << "{\n \"meta\": " << meta.str() << ",\n \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) os << (i ? ",\n  " : "\n  ") << rows[i].str();
  os << "\n ]\n}\n";
  return os.str();
}

}  // namespace attnkit::cli
