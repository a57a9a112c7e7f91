// Dispatch for the Hopper (sm_90a) prefill kernels: which requests they serve (anything else is
// Unsupported with the reason, and the dispatcher falls back to the portable kernels), the plan,
// and the launch of the variant from sm90_fwd_list.h. Split-KV runs the same variant with a
// run-time split count into a workspace of partials, then the portable path's combine kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "api/backends.h"
#include "cuda/attention/common/combine_kernel.cuh"
#include "cuda/attention/common/split_workspace.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"
#include "cuda/attention/sm90/sm90_split_plan.h"
#include "cuda/attention/sm90/sm90_tile_scheduler.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_guard.h"
#include "cuda/instantiations/sm90_fwd_list.h"

namespace attnkit::detail {
namespace {

using gpu::Sm90FwdArgs;

struct Variant {
  int dqk, dv;
  DType dtype;
  const char* policies;  // the variant's name in sm90_fwd_list.h: none, causal, local, ...
  const char* name;
  Status (*launch)(const Sm90FwdArgs&, cudaStream_t);
};

[[maybe_unused]] constexpr DType dtype_of(const char* t) {
  return t[0] == 'b' ? DType::kBFloat16 : DType::kFloat16;
}

#define ATTNKIT_SM90_VARIANT_ROW(D, DT, VARIANT)                              \
  Variant{ATTNKIT_SM90_DIMS_##D, dtype_of(#DT), #VARIANT,                       \
          "sm90_fwd_d" #D "_" #DT "_" #VARIANT,                               \
          &gpu::sm90_fwd_d##D##_##DT##_##VARIANT},
// The last row only keeps the array non-empty when the kernel filter drops every variant.
constexpr Variant kVariantRows[] = {ATTNKIT_SM90_FWD_LIST(ATTNKIT_SM90_VARIANT_ROW) Variant{}};
constexpr std::span<const Variant> kVariants(kVariantRows, std::size(kVariantRows) - 1);
#undef ATTNKIT_SM90_VARIANT_ROW

bool is_causal(const Mask& m) {
  return m.window_left < 0 && m.window_right == 0 && m.chunk_size == 0;
}

// The policies a request needs (nullptr: none built, softcap together with sinks, or either with
// paged K/V). The dedicated none / causal variants serve those masks when nothing else is asked
// for; any other mask, or a score mod or sinks, goes to the run-time-mask variants.
const char* policies_for(const AttnProblem& prob) {
  if (prob.kv == KvLayout::kPaged) {
    if (prob.softcap > 0.f || prob.has_sinks) return nullptr;
    if (prob.mask.is_none()) return "paged_none";
    if (is_causal(prob.mask)) return "paged_causal";
    return "paged_local";
  }
  if (prob.softcap > 0.f && prob.has_sinks) return nullptr;
  if (prob.softcap > 0.f) return "local_softcap";
  if (prob.has_sinks) return "local_sinks";
  if (prob.mask.is_none()) return "none";
  if (is_causal(prob.mask)) return "causal";
  return "local";
}

// d256 without a mask: 80-key tiles pay for long keys only (measured faster than 64-key tiles
// from 8k keys, slower below 4k, on the FA3 shapes). Only batched contiguous K/V without
// seqused_k, where every sequence has exactly k_rows keys.
constexpr int64_t kWideTileMinKeys = 8192;

bool wide_tile(const AttnProblem& prob) {
  return prob.dqk == 256 && prob.kv == KvLayout::kContiguous && !prob.has_seqused_k &&
         prob.k_rows >= kWideTileMinKeys;
}

const Variant* find_variant(const AttnProblem& prob) {
  const char* base = policies_for(prob);
  if (base == nullptr) return nullptr;
  std::string pol = base;
  if (pol == "none" && wide_tile(prob)) pol = "none_n80";
  for (const Variant& v : kVariants)
    if (v.dqk == prob.dqk && v.dv == prob.dv && v.dtype == prob.dtype && v.policies == pol)
      return &v;
  return nullptr;
}

// A split plan names the variant followed by this.
constexpr const char* kSplitSuffix = "+split_combine";

const Variant* find_variant(const std::string& kernel) {
  for (const Variant& v : kVariants)
    if (kernel == v.name || kernel == std::string(v.name) + kSplitSuffix) return &v;
  return nullptr;
}

// Split-KV count asked for by the caller, capped at kSm90MaxSplits (1 when left to the library).
int requested_splits(const AttentionArgs& args) {
  return args.num_splits > 1 ? std::min(args.num_splits, gpu::kSm90MaxSplits) : 1;
}

// The plan's split count: the caller's, or (num_splits = 0) the grid-fill rule of
// sm90_split_plan.h, whose count keeps the launch to one wave, so it never grows the tile count
// past max(unsplit tiles, SMs) and the tile bound of sm90_attention_supports still holds.
int plan_splits(const AttentionArgs& args, const AttnProblem& prob, int sm_count) {
  const int64_t rows = prob.q_ragged ? std::max<int64_t>(prob.max_seqlen_q, 0) : prob.q_rows;
  const int q_block = gpu::sm90_q_block(prob.dqk);
  gpu::Sm90SplitInput in;
  in.work_tiles = (rows + q_block - 1) / q_block * int64_t{prob.hq} * prob.batch;
  in.kv_tiles = gpu::sm90_kv_tiles_per_query_tile(prob.max_seqlen_k, q_block,
                                                   gpu::sm90_kv_block(prob.dqk), prob.mask.window_left,
                                                   prob.mask.window_right, prob.mask.chunk_size);
  in.sm_count = std::max(sm_count, 1);
  in.requested = args.num_splits;
  return gpu::sm90_split_count(in);
}

// The combine kernel's parameters (portable/fwd_params.h): the output's and the partials'.
gpu::FwdParams combine_params(const AttentionArgs& a, const AttnProblem& prob, int splits,
                              float* part_o, float* part_lse) {
  gpu::FwdParams p;
  set_output_params(p, a, prob);
  p.num_splits = splits;
  p.part_o = part_o;
  p.part_lse = part_lse;
  p.part_rows = split_part_rows(prob);
  return p;
}

// TMA reads Q, K and V: 16-byte aligned base, unit stride along the head dim, every other stride a
// multiple of 16 bytes (8 elements).
Status check_tma_operand(const TensorView& t, const char* name) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return Status::Unsupported(std::string("sm90 attention: ") + name + " must be 16-byte aligned");
  if (t.stride_of(-1) != 1)
    return Status::Unsupported(std::string("sm90 attention: ") + name +
                               " must be contiguous along the head dim");
  for (int i = 0; i + 1 < t.ndim; ++i)
    if ((t.shape[i] > 1 || i == 1) && (t.stride[i] % 8 != 0 || t.stride[i] <= 0 || t.stride[i] >= (int64_t{1} << 36)))
      return Status::Unsupported(std::string("sm90 attention: ") + name + " stride " +
                                 std::to_string(t.stride[i]) + " (dim " + std::to_string(i) +
                                 ") is not a positive multiple of 8 elements (TMA needs 16 bytes)");
  return Status::Ok();
}

// Causal, batched, contiguous K/V: the persistent grid over pairs of query tiles (one long, one
// short; PersistentCausalPairScheduler) up to these query rows, one CTA per tile longest first
// (d128, d256) or the persistent longest-first grid with 192-row tiles (d64) above: the pairs
// measured faster than those up to these lengths and slower beyond, on the FA3 shapes. Only where
// the pairs fill the SMs (causal_pairs_fill).
constexpr int64_t kPairCausalMaxRows = 8192;
constexpr int64_t kPairCausalMaxRowsD64 = 1024;

bool causal_pairs(const AttnProblem& prob, int sm_count) {
  if (!is_causal(prob.mask) || prob.kv != KvLayout::kContiguous || prob.q_ragged ||
      prob.has_seqused_k)
    return false;
  return prob.q_rows <= (prob.dqk == 64 ? kPairCausalMaxRowsD64 : kPairCausalMaxRows) &&
         gpu::sm90::causal_pairs_fill(prob.q_rows, int64_t{prob.hq} * prob.batch, sm_count);
}

}  // namespace

Status sm90_attention_supports(const AttentionArgs& args, const AttnProblem& prob) {
#if !defined(ATTNKIT_HAS_SM90A)
  (void)args;
  (void)prob;
  return Status::Unsupported("this attnkit build has no sm_90a target (ATTNKIT_CUDA_ARCHS lacks 90a)");
#else
  auto no = [](const std::string& why) { return Status::Unsupported("sm90 attention: " + why); };
  if (prob.dtype != DType::kBFloat16 && prob.dtype != DType::kFloat16)
    return no(std::string("supports bf16 and fp16, not ") + to_string(prob.dtype));
  if (prob.kv_fp8) return no("an FP8 KV cache is read by the portable decode kernel, not sm90");
  const bool square = prob.dqk == prob.dv;
  if (!(square && (prob.dqk == 64 || prob.dqk == 96 || prob.dqk == 128 || prob.dqk == 256)) &&
      !(prob.dqk == 192 && prob.dv == 128))
    return no("head dims " + std::to_string(prob.dqk) + "/" + std::to_string(prob.dv) +
              " not built (64, 96, 128, 256 and 192/128)");
  // 192/128 and 96 have the none and causal variants only (sm90_fwd_list.h).
  if ((!square || prob.dqk == 96) &&
      (!(prob.mask.is_none() || is_causal(prob.mask)) || prob.softcap > 0.f || prob.has_sinks ||
       prob.kv == KvLayout::kPaged))
    return no("head dims 192/128 and 96 are built for no mask and causal only (contiguous or "
              "ragged K/V, no softcap or sinks)");
  if (prob.kv == KvLayout::kPaged) {
    // TMA loads whole KV tiles, each from one page (sm90_kv.h).
    const int block = gpu::sm90_kv_block(prob.dqk);
    if (prob.page_size() % block != 0)
      return no("paged K/V needs a page size that is a multiple of the KV tile (" +
                std::to_string(block) + " keys at head dim " + std::to_string(prob.dqk) +
                "), not " + std::to_string(prob.page_size()));
    if (prob.softcap > 0.f || prob.has_sinks)
      return no("paged K/V with softcap or sinks is not built (paged with any mask is)");
    if (prob.num_pages < 1 || prob.num_pages >= (int64_t{1} << 31))
      return no("paged K/V needs between 1 and 2^31 - 1 pages");
    if (prob.max_pages * prob.page_size() >= (int64_t{1} << 30))
      return no("paged K/V: max_pages x page_size must stay below 2^30");
  }
  if (prob.has_alibi) return no("ALiBi is not supported yet");
  if (prob.softcap > 0.f && prob.has_sinks)
    return no("softcap together with learned sinks is not built (either alone is)");
  // The online softmax takes each row's max of the raw scores and scales after it, which keeps
  // exp2 from overflowing only when the scale is positive.
  if (prob.scale < 0.f) return no("a negative scale is not supported (the row max is taken before scaling)");
  if (prob.is_decode())
    return no("decode-sized queries (<= 16 rows) go to the portable split-KV kernels");
  if (prob.k_rows < 1) return no("needs at least one key row in k");
  if (prob.q_rows > (int64_t{1} << 30) || prob.k_rows > (int64_t{1} << 30))
    return no("sequence lengths (ragged: total rows) must stay below 2^30");
  // The persistent scheduler numbers work tiles (at least 128 query rows of one head) with an int,
  // with headroom for one more round of the grid. Per-sequence lengths: over a grid sized by the
  // longest sequence. (Each factor is below 2^31, so neither product overflows 64 bits.)
  const int64_t rows = prob.q_ragged ? std::max<int64_t>(prob.max_seqlen_q, 0) : prob.q_rows;
  // Split-KV multiplies the tiles by the split count (the automatic one stays within one wave).
  const int64_t tiles_per_batch = (rows + 127) / 128 * int64_t{prob.hq} * requested_splits(args);
  if (tiles_per_batch >= (int64_t{1} << 30) || tiles_per_batch * prob.batch >= (int64_t{1} << 30))
    return no("too many work tiles (query tiles x heads x batch x splits must stay below 2^30)");
  if (prob.mask.window_left > (1 << 30) || prob.mask.window_right > (1 << 30) ||
      prob.mask.chunk_size > (1 << 30))
    return no("window and chunk sizes must stay below 2^30");
  ATTNKIT_RETURN_IF_ERROR(check_tma_operand(args.q, "q"));
  ATTNKIT_RETURN_IF_ERROR(check_tma_operand(args.k, "k"));
  ATTNKIT_RETURN_IF_ERROR(check_tma_operand(args.v, "v"));
  // O is written with 16-byte (eight-element) stores.
  if (reinterpret_cast<uintptr_t>(args.o.data) % 16 != 0 || args.o.stride_of(-1) != 1)
    return no("o must be 16-byte aligned and contiguous along the head dim");
  for (int i = 0; i + 1 < args.o.ndim; ++i)
    if (args.o.shape[i] > 1 && args.o.stride[i] % 8 != 0)
      return no("o strides must be multiples of 8 elements (16 bytes)");
  // Index tensors are addressed with int strides (sm90_seqlen.h).
  for (auto [t, name] : {std::pair{&args.cu_seqlens_q, "cu_seqlens_q"},
                         {&args.cu_seqlens_k, "cu_seqlens_k"}, {&args.seqused_k, "seqused_k"}})
    if (t->defined() && t->shape[0] > 1 && t->stride[0] >= (int64_t{1} << 30))
      return no(std::string(name) + " stride must stay below 2^30");
  if (find_variant(prob) == nullptr)
    return no("no kernel variant for this request" + kernel_filter_note());
  return Status::Ok();
#endif
}

Status sm90_attention_plan(const AttentionArgs& args, const AttnProblem& prob,
                           const CudaDeviceInfo& dev, AttentionPlan* plan) {
  if (dev.cc_major != 9) return Status::Unsupported("sm90 attention needs a Hopper GPU (compute 9.x)");
  ATTNKIT_RETURN_IF_ERROR(sm90_attention_supports(args, prob));
  const Variant* v = find_variant(prob);
  const int splits = plan_splits(args, prob, dev.sm_count);
  plan->backend = Backend::kCudaSm90;
  plan->kernel = std::string(v->name) + (splits > 1 ? kSplitSuffix : "");
  plan->num_splits = splits;
  plan->workspace_bytes = split_workspace(prob, splits, 0).bytes;
  return Status::Ok();
}

Status sm90_attention_forward(const AttentionArgs& a, const AttnProblem& prob,
                              const ExecOptions& opts, const AttentionPlan& plan) {
  const Variant* v = find_variant(plan.kernel);
  if (v == nullptr || v != find_variant(prob))
    return Status::Invalid("plan names kernel '" + plan.kernel + "', which does not serve this request");
  const int splits = plan.num_splits;
  const bool split_name = plan.kernel != v->name;
  if (splits < 1 || splits > gpu::kSm90MaxSplits || split_name != (splits > 1))
    return Status::Invalid("plan (kernel '" + plan.kernel + "') num_splits " +
                           std::to_string(splits) + " does not match its kernel");
  if (prob.batch == 0 || prob.q_rows == 0) return Status::Ok();  // nothing to compute or write
  // The tile bound of sm90_attention_supports, for the plan's split count.
  const int64_t rows = prob.q_ragged ? std::max<int64_t>(prob.max_seqlen_q, 0) : prob.q_rows;
  if ((rows + 127) / 128 * int64_t{prob.hq} * splits * prob.batch >= (int64_t{1} << 30))
    return Status::Invalid("plan num_splits " + std::to_string(splits) +
                           " makes 2^30 or more work tiles for these arguments");
  Sm90FwdArgs g;
  g.q = a.q.data;
  g.k = a.k.data;
  g.v = a.v.data;
  g.o = a.o.data;
  // Ragged tensors have no batch dim: batch extent 1, stride 0 (rows, heads are dims 0, 1).
  const int qd = prob.q_ragged ? 0 : 1;
  const int kd = prob.kv == KvLayout::kRagged ? 0 : 1;
  g.q_batch = qd ? a.q.stride[0] : 0, g.q_row = a.q.stride[qd], g.q_head = a.q.stride[qd + 1];
  g.k_batch = kd ? a.k.stride[0] : 0, g.k_row = a.k.stride[kd], g.k_head = a.k.stride[kd + 1];
  g.v_batch = kd ? a.v.stride[0] : 0, g.v_row = a.v.stride[kd], g.v_head = a.v.stride[kd + 1];
  g.o_batch = qd ? a.o.stride[0] : 0, g.o_row = a.o.stride[qd], g.o_head = a.o.stride[qd + 1];
  if (prob.has_lse) {
    g.lse = static_cast<float*>(a.lse.data);
    g.lse_batch = qd ? a.lse.stride[0] : 0, g.lse_row = a.lse.stride[qd], g.lse_head = a.lse.stride[qd + 1];
  }
  g.batch = prob.batch;
  g.sq = static_cast<int>(prob.q_rows);
  g.sk = static_cast<int>(prob.k_rows);
  g.q_batches = qd ? prob.batch : 1;
  g.k_batches = kd ? prob.batch : 1;
  if (prob.kv == KvLayout::kPaged) {
    // TMA's batch dim is the page (Sm90FwdArgs): k / v _batch are already the page strides.
    g.k_batches = static_cast<int>(prob.num_pages);
    g.page_table = static_cast<const int32_t*>(a.page_table.data);
    g.pt_batch_stride = a.page_table.stride[0];
    g.pt_col_stride = a.page_table.stride[1];
    g.max_pages = static_cast<int>(prob.max_pages);
  }
  g.max_seqlen_q = prob.q_ragged ? prob.max_seqlen_q : static_cast<int>(prob.q_rows);
  g.hq = prob.hq;
  g.hkv = prob.hkv;
  g.scale = prob.scale;
  if (prob.q_ragged) {
    g.cu_seqlens_q = static_cast<const int32_t*>(a.cu_seqlens_q.data);
    g.cu_q_stride = a.cu_seqlens_q.stride[0];
  }
  if (prob.kv == KvLayout::kRagged) {
    g.cu_seqlens_k = static_cast<const int32_t*>(a.cu_seqlens_k.data);
    g.cu_k_stride = a.cu_seqlens_k.stride[0];
  }
  if (prob.has_seqused_k) {
    g.seqused_k = static_cast<const int32_t*>(a.seqused_k.data);
    g.seqused_k_stride = a.seqused_k.stride[0];
  }
  g.window_left = prob.mask.window_left;
  g.window_right = prob.mask.window_right;
  g.chunk_size = prob.mask.chunk_size;
  g.softcap = prob.softcap;
  if (prob.has_sinks) {
    g.sinks = static_cast<const float*>(a.sinks.data);
    g.sinks_stride = a.sinks.stride[0];
  }
  CudaDeviceInfo dev;
  ATTNKIT_RETURN_IF_ERROR(cuda_device_info(prob.device.index, &dev));
  g.sm_count = dev.sm_count;
  // With split-KV the pairs would be two splits of one query tile: the variant's scheduler then.
  g.causal_pairs = splits <= 1 && causal_pairs(prob, dev.sm_count);
  DeviceGuard guard(prob.device.index);
  if (!guard.ok()) return Status::Cuda("sm90 attention: cannot select CUDA device " +
                                       std::to_string(prob.device.index));
  const auto stream = static_cast<cudaStream_t>(opts.stream);
  if (splits <= 1) return v->launch(g, stream);

  const SplitWorkspace layout = split_workspace(prob, splits, 0);
  void* ws = nullptr;
  void* owned = nullptr;
  ATTNKIT_RETURN_IF_ERROR(acquire_split_workspace(opts, layout.bytes, stream, &ws, &owned));
  float* part_o = static_cast<float*>(ws);
  float* part_lse = reinterpret_cast<float*>(static_cast<char*>(ws) + layout.lse_offset);
  g.num_splits = splits;
  g.part_o = part_o;
  g.part_lse = part_lse;
  g.part_rows = split_part_rows(prob);
  const Status st = [&]() -> Status {
    ATTNKIT_RETURN_IF_ERROR(v->launch(g, stream));
    return gpu::launch_split_combine(combine_params(a, prob, splits, part_o, part_lse),
                                     prob.dtype == DType::kBFloat16, prob.dv, stream);
  }();
  return release_split_workspace(owned, stream, st);
}

}  // namespace attnkit::detail
