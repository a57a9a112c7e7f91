#include "flags.h"

#include "commands.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace attnkit::cli {

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e;
}

bool parse_float(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size();
}

bool parse_bool(const std::string& s, bool* out) {
  if (s == "1" || s == "true" || s == "yes" || s == "on") return *out = true, true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return *out = false, true;
  return false;
}

bool parse_int_list(const std::string& s, std::vector<int64_t>* out) {
  out->clear();
  if (s.empty()) return true;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t v;
    if (!parse_int(item, &v)) return false;
    out->push_back(v);
  }
  return s.back() != ',';
}

Flags::Flags(std::string usage, std::string about)
    : usage_(std::move(usage)), about_(std::move(about)) {}

Flags& Flags::add(const std::string& name, FlagType type, const std::string& def,
                  const std::string& help) {
  flags_[name] = Flag{type, def, def, help};
  order_.emplace_back("", name);
  return *this;
}

Flags& Flags::section(const std::string& title) {
  order_.emplace_back(title, "");
  return *this;
}

std::string Flags::valid_list() const {
  std::string s;
  for (const auto& [title, name] : order_)
    if (!name.empty()) s += (s.empty() ? "--" : ", --") + name;
  return s + ", --help";
}

Status Flags::set(const std::string& name, const std::string& value) {
  auto it = flags_.find(name);
  if (it == flags_.end())
    return Status::Invalid("unknown flag --" + name + "; valid flags: " + valid_list());
  Flag& f = it->second;
  int64_t i;
  double d;
  bool b;
  std::vector<int64_t> l;
  bool ok = true;
  const char* want = "";
  switch (f.type) {
    case FlagType::kString: break;
    case FlagType::kInt: ok = parse_int(value, &i), want = "an integer"; break;
    case FlagType::kFloat: ok = parse_float(value, &d), want = "a number"; break;
    case FlagType::kBool: ok = parse_bool(value, &b), want = "true or false"; break;
    case FlagType::kIntList:
      ok = parse_int_list(value, &l), want = "a comma-separated list of integers, e.g. 5,0,17";
      break;
  }
  if (!ok) return Status::Invalid("--" + name + " wants " + want + ", got '" + value + "'");
  f.value = value;
  f.given = true;
  return Status::Ok();
}

Status Flags::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0)
      return Status::Invalid("unexpected argument '" + a + "' (flags start with --); valid flags: " +
                             valid_list());
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    auto it = flags_.find(name);
    if (it == flags_.end())
      return Status::Invalid("unknown flag --" + name + "; valid flags: " + valid_list());
    if (!has_value) {
      if (it->second.type == FlagType::kBool) {
        // A bare boolean means true; a following true/false word is taken as its value.
        bool b;
        value = "true";
        if (i + 1 < args.size() && parse_bool(args[i + 1], &b)) value = args[++i];
      } else {
        if (i + 1 >= args.size()) return Status::Invalid("--" + name + " needs a value");
        value = args[++i];
      }
    }
    ATTNKIT_RETURN_IF_ERROR(set(name, value));
  }
  return Status::Ok();
}

std::string Flags::help() const {
  std::ostringstream os;
  os << "usage: " << usage_ << "\n";
  if (!about_.empty()) os << "\n" << about_ << "\n";
  for (const auto& [title, name] : order_) {
    if (name.empty()) {
      os << "\n" << title << ":\n";
      continue;
    }
    const Flag& f = flags_.at(name);
    std::string left = "  --" + name;
    switch (f.type) {
      case FlagType::kString: left += " S"; break;
      case FlagType::kInt: left += " N"; break;
      case FlagType::kFloat: left += " X"; break;
      case FlagType::kBool: break;
      case FlagType::kIntList: left += " N,N,..."; break;
    }
    if (left.size() < 26) left.resize(26, ' ');
    else left += "\n" + std::string(26, ' ');
    os << left << f.help;
    if (!f.def.empty() && f.type != FlagType::kBool) os << " [default: " << f.def << "]";
    os << "\n";
  }
  os << "  --help                  this text\n";
  return os.str();
}

const Flags::Flag& Flags::get(const std::string& name, FlagType type) const {
  auto it = flags_.find(name);
  if (it == flags_.end() || it->second.type != type) {
    // A programming error in a command (asked for a flag it never declared): fail loudly.
    std::fprintf(stderr, "attnkit: internal error: flag --%s read with the wrong type\n",
                 name.c_str());
    std::abort();
  }
  return it->second;
}

bool Flags::given(const std::string& name) const {
  auto it = flags_.find(name);
  return it != flags_.end() && it->second.given;
}

std::string Flags::str(const std::string& name) const { return get(name, FlagType::kString).value; }

int64_t Flags::integer(const std::string& name) const {
  int64_t v = 0;
  parse_int(get(name, FlagType::kInt).value, &v);
  return v;
}

double Flags::number(const std::string& name) const {
  double v = 0;
  parse_float(get(name, FlagType::kFloat).value, &v);
  return v;
}

bool Flags::boolean(const std::string& name) const {
  bool v = false;
  const std::string& s = get(name, FlagType::kBool).value;
  return !s.empty() && parse_bool(s, &v) && v;
}

std::vector<int64_t> Flags::int_list(const std::string& name) const {
  std::vector<int64_t> v;
  parse_int_list(get(name, FlagType::kIntList).value, &v);
  return v;
}

std::optional<int> parse_command_flags(Flags& f, const std::vector<std::string>& args,
                                       const char* command) {
  const Status st = f.parse(args);
  if (!st.ok()) {
    std::fprintf(stderr, "attnkit %s: %s\n(see attnkit %s --help)\n", command, st.message().c_str(),
                 command);
    return kExitUsage;
  }
  if (f.help_requested()) {
    std::printf("%s", f.help().c_str());
    return kExitOk;
  }
  return std::nullopt;
}

}  // namespace attnkit::cli
