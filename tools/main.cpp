// attnkit: the command-line program. Routes to the commands (bench, check, gdn-files, info) and
// prints help.
#include <cstdio>
#include <string>
#include <vector>

#include "attnkit/attnkit.h"
#include "commands.h"
#include "gpu.h"

namespace attnkit::cli {
namespace {

const char* kUsage =
    "usage: attnkit <command> [flags]\n"
    "\n"
    "attnkit: attention kernels for LLM inference (softmax attention and Gated DeltaNet).\n"
    "\n"
    "commands:\n"
    "  bench      time the ops on a shape set and print a table (and JSON with --json)\n"
    "  check      run one op (or --edge-shapes) and compare it with a reference\n"
    "  gdn-files  Gated DeltaNet on inputs read from files, with the fp32 reference (accuracy\n"
    "             side by side with another implementation: bench/gdn_accuracy.py)\n"
    "  info       version, CUDA build and architectures, the device found\n"
    "  help       this text ('attnkit <command> --help' documents each command's flags)\n"
    "\n"
    "examples:\n"
    "  attnkit bench --shapes decode --json decode.json\n"
    "  attnkit check --paged --page-size 48 --varlen-k 500,64,49 --seqlen-q 1 --batch 3 --lse\n"
    "  attnkit check --op gdn --varlen 0,64,1,130 --initial-state\n"
    "  attnkit check --edge-shapes\n";

}  // namespace

int info_main(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::printf("usage: attnkit info\n\nPrints the version, whether CUDA kernels are built and "
                  "for which architectures, and the CUDA device found.\n");
      return kExitOk;
    }
    std::fprintf(stderr, "attnkit info: unexpected argument '%s' (info takes no flags)\n", a.c_str());
    return kExitUsage;
  }
  std::printf("attnkit %s\n", version());
  std::printf("CUDA kernels built: %s", built_with_cuda() ? "yes" : "no");
  if (built_with_cuda())
    std::printf(" (architectures: %s; attention kernels: %s)", cuda_architectures(), kernel_filter());
  std::printf("\n");
  gpu::DeviceFacts f;
  std::string why;
  if (gpu::device_facts(&f, &why)) {
    std::printf("device: %s, compute capability %d.%d, %d SMs, %.1f GiB, L2 %.0f MiB\n",
                f.name.c_str(), f.cc_major, f.cc_minor, f.sm_count, f.memory_bytes / 1073741824.0,
                f.l2_bytes / 1048576.0);
    std::printf("CUDA driver %d.%d, runtime %d.%d\n", f.driver_version / 1000,
                f.driver_version % 1000 / 10, f.runtime_version / 1000,
                f.runtime_version % 1000 / 10);
  } else {
    std::printf("device: none (%s); ops run on the CPU reference backend\n", why.c_str());
  }
  return kExitOk;
}

}  // namespace attnkit::cli

int main(int argc, char** argv) {
  using namespace attnkit::cli;
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::printf("%s", kUsage);
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::printf("attnkit %s\n", attnkit::version());
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "bench") return bench_main(rest);
  if (args[0] == "check") return check_main(rest);
  if (args[0] == "gdn-files") return gdn_files_main(rest);
  if (args[0] == "info") return info_main(rest);
  std::fprintf(stderr, "attnkit: unknown command '%s' (bench, check, gdn-files, info, help)\n", args[0].c_str());
  return kExitUsage;
}
