// The attnkit program's commands; main.cpp routes to them. Each returns the process exit code:
// 0 success, 1 a failed check or benchmark error, 2 a bad command line, 3 an op that is not
// supported (e.g. not implemented yet for the chosen backend).
#pragma once

#include <string>
#include <vector>

namespace attnkit::cli {

inline constexpr int kExitOk = 0, kExitFail = 1, kExitUsage = 2, kExitUnsupported = 3;

int bench_main(const std::vector<std::string>& args);
int check_main(const std::vector<std::string>& args);
int gdn_files_main(const std::vector<std::string>& args);
int info_main(const std::vector<std::string>& args);

}  // namespace attnkit::cli
