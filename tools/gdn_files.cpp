// `attnkit gdn-files`: Gated DeltaNet's chunked forward on inputs read from raw files, so that
// another implementation can be measured on the very same inputs (bench/gdn_accuracy.py does this
// for flash-linear-attention). Alongside attnkit's output it writes the token-by-token recurrent
// form evaluated in fp32 on the CPU: the reference both are compared with.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "cases.h"
#include "commands.h"
#include "flags.h"
#include "gpu.h"
#include "testkit/compare.h"

namespace attnkit::cli {
namespace {

using testkit::Buffer;

Flags make_flags() {
  Flags f("attnkit gdn-files --dir DIR [flags]",
          "Runs Gated DeltaNet's chunked forward (gdn_chunk_forward, no initial state, final state\n"
          "out) on inputs read from DIR, raw little-endian arrays in the layouts of\n"
          "include/attnkit/gdn.h with B = 1:\n"
          "  q.bf16, k.bf16 [T, H, K]; v.bf16 [T, HV, V]; g.f32 [T, HV] (log gate); beta.bf16 [T, HV]\n"
          "It writes attnkit's output and the reference, all fp32:\n"
          "  o_attnkit.f32 [T, HV, V], state_attnkit.f32 [N, HV, K, V]  (the chosen backend)\n"
          "  o_ref.f32, state_ref.f32  (the recurrent definition, fp32, CPU)\n"
          "and prints the relative L2 error of attnkit's output against the reference.");
  f.add("dir", FlagType::kString, "", "folder with the inputs; the outputs are written there too")
      .add("seqlen", FlagType::kInt, "", "tokens of the one sequence (or give --varlen)")
      .add("varlen", FlagType::kIntList, "", "ragged batch: comma list of sequence lengths")
      .add("heads", FlagType::kInt, "16", "q/k heads H")
      .add("heads-v", FlagType::kInt, "32", "value heads HV (a multiple of H)")
      .add("dim-k", FlagType::kInt, "128", "K")
      .add("dim-v", FlagType::kInt, "128", "V")
      .add("scale", FlagType::kFloat, "0", "output scale (0 = K^-1/2)")
      .add("backend", FlagType::kString, "auto", "auto | cuda-portable | cpu: runs attnkit's op")
      .add("threads", FlagType::kInt, "0", "CPU threads (0 = all)");
  return f;
}

Status read_into(const std::string& path, Buffer& b) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Invalid("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() != b.bytes())
    return Status::Invalid(path + " holds " + std::to_string(bytes.size()) + " bytes, the shape needs " +
                           std::to_string(b.bytes()));
  std::memcpy(b.data(), bytes.data(), bytes.size());
  return Status::Ok();
}

Status write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return out ? Status::Ok() : Status::Invalid("cannot write " + path);
}

// The same values in fp32, for the reference.
Buffer widen(const Buffer& b) {
  if (b.shape().empty()) return Buffer();
  Buffer w(DType::kFloat32, b.shape());
  w.from_float(b.to_float());
  return w;
}

Status run(const Flags& f) {
  if (!f.given("dir")) return Status::Invalid("--dir is required");
  GdnCase c;
  c.varlen = f.int_list("varlen");
  if (c.varlen.empty() == !f.given("seqlen")) return Status::Invalid("give exactly one of --seqlen and --varlen");
  if (f.given("seqlen")) c.seqlen = f.integer("seqlen");
  c.heads = static_cast<int>(f.integer("heads"));
  c.heads_v = static_cast<int>(f.integer("heads-v"));
  c.dim_k = static_cast<int>(f.integer("dim-k"));
  c.dim_v = static_cast<int>(f.integer("dim-v"));
  c.scale = static_cast<float>(f.number("scale"));
  c.final_state = true;
  ATTNKIT_RETURN_IF_ERROR(c.check(false));
  Backend backend;
  if (!parse_backend(f.str("backend"), &backend) || backend == Backend::kCudaSm90)
    return Status::Invalid("--backend must be auto, cuda-portable or cpu, got '" + f.str("backend") + "'");
  const bool on_gpu = backend != Backend::kCPU;
  std::string why;
  gpu::DeviceFacts facts;
  if (on_gpu && !gpu::device_facts(&facts, &why))
    return Status::Invalid("--backend " + f.str("backend") + " needs a CUDA device: " + why + " (or --backend cpu)");

  const std::string dir = f.str("dir");
  const int64_t T = c.total_tokens(), N = c.num_seqs();
  GdnTensors host;
  host.q = Buffer(DType::kBFloat16, {1, T, c.heads, c.dim_k});
  host.k = Buffer(DType::kBFloat16, {1, T, c.heads, c.dim_k});
  host.v = Buffer(DType::kBFloat16, {1, T, c.heads_v, c.dim_v});
  host.g = Buffer(DType::kFloat32, {1, T, c.heads_v});
  host.beta = Buffer(DType::kBFloat16, {1, T, c.heads_v});
  host.o = Buffer(DType::kBFloat16, {1, T, c.heads_v, c.dim_v});
  host.ht = Buffer(DType::kFloat32, {N, c.heads_v, c.dim_k, c.dim_v});
  if (!c.varlen.empty()) {
    std::vector<int32_t> cu(1, 0);
    for (int64_t n : c.varlen) cu.push_back(cu.back() + static_cast<int32_t>(n));
    host.cu = Buffer(DType::kInt32, {N + 1});
    host.cu.from_int(cu);
  }
  ATTNKIT_RETURN_IF_ERROR(read_into(dir + "/q.bf16", host.q));
  ATTNKIT_RETURN_IF_ERROR(read_into(dir + "/k.bf16", host.k));
  ATTNKIT_RETURN_IF_ERROR(read_into(dir + "/v.bf16", host.v));
  ATTNKIT_RETURN_IF_ERROR(read_into(dir + "/g.f32", host.g));
  ATTNKIT_RETURN_IF_ERROR(read_into(dir + "/beta.bf16", host.beta));

  ExecOptions opts;
  opts.backend = backend;
  opts.cpu_threads = static_cast<int>(f.integer("threads"));
  std::vector<float> o, ht;
  if (on_gpu) {
    GdnTensors dev = copy_gdn(host, cuda(0));
    dev.poison_outputs();
    ATTNKIT_RETURN_IF_ERROR(gdn_chunk_forward(dev.args(c), opts));
    ATTNKIT_RETURN_IF_ERROR(gpu::synchronize());
    o = dev.o.to_float();
    ht = dev.ht.to_float();
  } else {
    host.poison_outputs();
    ATTNKIT_RETURN_IF_ERROR(gdn_chunk_forward(host.args(c), opts));
    o = host.o.to_float();
    ht = host.ht.to_float();
  }

  // The reference sees the same (already rounded) inputs, widened to fp32, and keeps fp32 outputs.
  GdnTensors ref;
  ref.q = widen(host.q);
  ref.k = widen(host.k);
  ref.v = widen(host.v);
  ref.g = widen(host.g);
  ref.beta = widen(host.beta);
  ref.cu = host.cu.shape().empty() ? Buffer() : host.cu.to(cpu());
  ref.o = Buffer(DType::kFloat32, host.o.shape());
  ref.ht = Buffer(DType::kFloat32, host.ht.shape());
  ref.poison_outputs();
  ExecOptions ref_opts;
  ref_opts.backend = Backend::kCPU;
  ref_opts.cpu_threads = opts.cpu_threads;
  ATTNKIT_RETURN_IF_ERROR(gdn_recurrent_forward(ref.args(c), ref_opts));
  const std::vector<float> ref_o = ref.o.to_float(), ref_ht = ref.ht.to_float();

  ATTNKIT_RETURN_IF_ERROR(write_floats(dir + "/o_attnkit.f32", o));
  ATTNKIT_RETURN_IF_ERROR(write_floats(dir + "/state_attnkit.f32", ht));
  ATTNKIT_RETURN_IF_ERROR(write_floats(dir + "/o_ref.f32", ref_o));
  ATTNKIT_RETURN_IF_ERROR(write_floats(dir + "/state_ref.f32", ref_ht));
  std::printf("gdn-files %s on %s (%s)\n", c.describe(false).c_str(), on_gpu ? facts.name.c_str() : "cpu",
              to_string(backend));
  std::printf("o     vs fp32 recurrent reference: %s\n", testkit::compare(o, ref_o).str().c_str());
  std::printf("state vs fp32 recurrent reference: %s\n", testkit::compare(ht, ref_ht).str().c_str());
  return Status::Ok();
}

}  // namespace

int gdn_files_main(const std::vector<std::string>& args) {
  Flags f = make_flags();
  if (const auto done = parse_command_flags(f, args, "gdn-files")) return *done;
  const Status st = run(f);
  if (!st.ok()) {
    std::fprintf(stderr, "attnkit gdn-files: %s\n", st.message().c_str());
    if (st.code() == StatusCode::kInvalidArgument) return kExitUsage;
    return st.code() == StatusCode::kUnsupported ? kExitUnsupported : kExitFail;
  }
  return kExitOk;
}

}  // namespace attnkit::cli
