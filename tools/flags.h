// A small command-line flag parser for the attnkit program: `--name value` or `--name=value`,
// booleans as a bare `--name` (or `--name=false`), typed getters. Each command declares its flags
// with a help line; an unknown flag is an error that lists the valid ones.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/status.h"

namespace attnkit::cli {

enum class FlagType { kString, kInt, kFloat, kBool, kIntList };

class Flags {
 public:
  // `usage` is the first help line, e.g. "attnkit check [flags]"; `about` follows it.
  Flags(std::string usage, std::string about);

  // Declares a flag (name without the dashes). `def` is its default, written as on the command
  // line ("" for none). Returns *this so declarations chain.
  Flags& add(const std::string& name, FlagType type, const std::string& def,
             const std::string& help);
  // A heading in the help text, before the flags declared after it.
  Flags& section(const std::string& title);

  // Parses the arguments that follow the command name. Values are type-checked here, so getters
  // cannot fail later. `--help` / `-h` sets help_requested() instead of failing.
  Status parse(const std::vector<std::string>& args);

  bool help_requested() const { return help_; }
  std::string help() const;

  bool given(const std::string& name) const;  // set on the command line (not just defaulted)
  std::string str(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  bool boolean(const std::string& name) const;
  std::vector<int64_t> int_list(const std::string& name) const;

 private:
  struct Flag {
    FlagType type;
    std::string value;
    std::string def;
    std::string help;
    bool given = false;
  };
  const Flag& get(const std::string& name, FlagType type) const;
  Status set(const std::string& name, const std::string& value);
  std::string valid_list() const;

  std::string usage_, about_;
  std::map<std::string, Flag> flags_;
  std::vector<std::pair<std::string, std::string>> order_;  // (section title or "", flag name)
  bool help_ = false;
};

// A command's start: parses `args` into `f`. Returns the exit code to end with, after printing
// what it must (a bad flag: the reason and a pointer to `attnkit <command> --help`, exit 2;
// --help: the help text, exit 0), or nothing when the command goes on.
std::optional<int> parse_command_flags(Flags& f, const std::vector<std::string>& args,
                                       const char* command);

// Value parsers shared with the commands (a whole-string match, or false).
bool parse_int(const std::string& s, int64_t* out);
bool parse_float(const std::string& s, double* out);
bool parse_bool(const std::string& s, bool* out);
bool parse_int_list(const std::string& s, std::vector<int64_t>* out);

}  // namespace attnkit::cli
