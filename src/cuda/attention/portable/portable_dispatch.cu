// Dispatch for the portable (sm_80+) attention kernels: which compiled variant serves a request,
// the split-KV plan, the kernel parameters, the workspace, and the launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "api/backends.h"
#include "cuda/attention/portable/planner.h"
#include "cuda/attention/common/split_workspace.h"
#include "cuda/attention/portable/decode_launch.cuh"
#include "cuda/attention/portable/fwd_launch.cuh"
#include "cuda/attention/sm90/sm90_decode_tiles.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_guard.h"
#include "cuda/instantiations/portable_decode_list.h"
#include "cuda/instantiations/portable_fwd_list.h"
#include "cuda/instantiations/sm90_decode_list.h"

namespace attnkit::detail {
namespace {

using gpu::FwdParams;

// kPlain: no mask, no score mod; kMask: masks; kFull: masks + softcap + ALiBi.
enum class Policy { kPlain, kMask, kFull };

bool generic(Policy p) { return p == Policy::kFull; }

struct Variant {
  int dqk, dv;
  DType dtype;
  Policy policy;
  int decode_rows;  // decode kernel: the most query rows (tokens x group) per KV head; 0: prefill
  bool kv_fp8;      // decode kernel over an e4m3 KV cache
  const char* name;
  Status (*launch)(const FwdParams&, void*);
  // Decode: the same kernel reading K/V evict-first in L2 (decode_l2_stream; plan suffix below);
  // null where there is no such twin (the FP8 variants, decode_launch.cuh says why).
  Status (*launch_l2stream)(const FwdParams&, void*);
  // Prefill: the shared memory the regular tiles need, and the launcher of the tiles that fit
  // gpu::kCompactSmemBytes (for devices that grant less than smem_bytes; plan suffix below).
  int smem_bytes;
  Status (*launch_compact)(const FwdParams&, void*);
};

// Marks a decode plan whose K/V are read evict-first in L2.
constexpr const char* kL2StreamSuffix = "+l2stream";
// Marks a decode plan on the Hopper (TMA) decode kernel of the same variant.
constexpr const char* kTmaSuffix = "+sm90tma";
// Marks a prefill plan on the compact tiles.
constexpr const char* kCompactSuffix = "+smem99k";
// The decode kernel fits every sm_80+ device as it is.
static_assert(gpu::kDecodeSmemBudget <= gpu::kCompactSmemBytes);

[[maybe_unused]] constexpr DType dtype_of(const char* t) {
  return t[0] == 'b' ? DType::kBFloat16 : DType::kFloat16;
}
constexpr Policy policy_of(const char* mask, const char* mod) {
  return mask[0] == 'N' ? Policy::kPlain : mod[0] == 'N' ? Policy::kMask : Policy::kFull;
}

#define ATTNKIT_VARIANT_ROW(DQK, DV, DT, MASK, MOD, TILE)                                   \
  Variant{DQK, DV, dtype_of(#DT), policy_of(#MASK, #MOD), 0, false,                         \
          "portable_fwd_" #DQK "_" #DV "_" #DT "_" #MASK "_" #MOD "_" #TILE,                \
          &gpu::ATTNKIT_PORTABLE_FWD_FN(DQK, DV, DT, MASK, MOD, TILE), nullptr,             \
          gpu::prefill_smem_bytes<DQK, DV, gpu::MASK, gpu::MOD>(),                          \
          &gpu::ATTNKIT_PORTABLE_FWD_FN_COMPACT(DQK, DV, DT, MASK, MOD, TILE)},
#define ATTNKIT_DECODE_VARIANT_ROW(DQK, DV, DT, MASK, MOD, ROWS)                            \
  Variant{DQK, DV, dtype_of(#DT), policy_of(#MASK, #MOD), ROWS, false,                      \
          "portable_fwd_" #DQK "_" #DV "_" #DT "_" #MASK "_" #MOD "_decode" #ROWS,          \
          &gpu::ATTNKIT_PORTABLE_DECODE_FN(DQK, DV, DT, MASK, MOD, ROWS),                   \
          &gpu::ATTNKIT_PORTABLE_DECODE_FN_L2STREAM(DQK, DV, DT, MASK, MOD, ROWS), 0, nullptr},
#define ATTNKIT_DECODE_FP8_VARIANT_ROW(DQK, DV, DT, MASK, MOD, ROWS)                        \
  Variant{DQK, DV, dtype_of(#DT), policy_of(#MASK, #MOD), ROWS, true,                       \
          "portable_fwd_" #DQK "_" #DV "_" #DT "_" #MASK "_" #MOD "_decode" #ROWS "_e4m3kv", \
          &gpu::ATTNKIT_PORTABLE_DECODE_FN_FP8(DQK, DV, DT, MASK, MOD, ROWS), nullptr, 0, nullptr},
// The last row only keeps the array non-empty when the kernel filter drops every variant.
constexpr Variant kVariantRows[] = {ATTNKIT_PORTABLE_FWD_LIST(ATTNKIT_VARIANT_ROW)
                                        ATTNKIT_PORTABLE_DECODE_LIST(ATTNKIT_DECODE_VARIANT_ROW)
                                            ATTNKIT_PORTABLE_DECODE_FP8_LIST(
                                                ATTNKIT_DECODE_FP8_VARIANT_ROW) Variant{}};
constexpr std::span<const Variant> kVariants(kVariantRows, std::size(kVariantRows) - 1);
#undef ATTNKIT_VARIANT_ROW
#undef ATTNKIT_DECODE_VARIANT_ROW
#undef ATTNKIT_DECODE_FP8_VARIANT_ROW

// The Hopper decode kernels (sm90_decode_list.h), keyed like the portable decode variants.
using TmaLaunch = Status (*)(const FwdParams&, bool l2_evict_first, void* stream);
struct TmaDecode {
  int d;
  DType dtype;
  Policy policy;
  int rows;
  TmaLaunch launch;
};
#if defined(ATTNKIT_HAS_SM90A)
#define ATTNKIT_TMA_DECODE_ROW(D, DT, MASK, MOD, ROWS)                  \
  TmaDecode{D, dtype_of(#DT), policy_of(#MASK, #MOD), ROWS,             \
            &gpu::sm90::ATTNKIT_SM90_DECODE_FN(D, DT, MASK, MOD, ROWS)},
constexpr TmaDecode kTmaRows[] = {ATTNKIT_SM90_DECODE_LIST(ATTNKIT_TMA_DECODE_ROW) TmaDecode{}};
#undef ATTNKIT_TMA_DECODE_ROW
#else
constexpr TmaDecode kTmaRows[] = {TmaDecode{}};
#endif
constexpr std::span<const TmaDecode> kTmaDecodes(kTmaRows, std::size(kTmaRows) - 1);

// The Hopper kernel of a decode variant over a bf16 / fp16 cache, or null.
TmaLaunch find_tma(const Variant& v) {
  if (v.decode_rows == 0 || v.kv_fp8 || v.dqk != v.dv) return nullptr;
  for (const TmaDecode& t : kTmaDecodes)
    if (t.d == v.dqk && t.dtype == v.dtype && t.policy == v.policy && t.rows == v.decode_rows)
      return t.launch;
  return nullptr;
}

// Why TMA cannot read this call's K and V (sm90_decode_launch.cuh), or "" when it can: it needs
// 16-byte aligned bases and strides, pages of a multiple of 8 rows (a box fills whole swizzle
// atoms) and a cache that is not empty. Strides of extents of 1 are not used.
std::string tma_refusal(const FwdParams& p) {
  const gpu::KvOperand& kv = p.kv;
  const bool paged = kv.kind == gpu::KvKind::kPaged;
  if (paged && gpu::sm90::decode_box_rows(gpu::sm90::kDecodeTmaKeys, kv.page_size.d) == 0)
    return "a page size that is a multiple of 8 (this cache: " + std::to_string(kv.page_size.d) +
           ")";
  const int64_t outers = paged ? kv.num_pages : kv.kind == gpu::KvKind::kContiguous ? p.batch : 1;
  const int64_t rows = paged ? kv.page_size.d : kv.k_rows;
  if (rows < 1 || outers < 1) return "a cache that is not empty";
  auto aligned = [](int64_t stride_elems, int64_t extent) {
    return extent == 1 || (stride_elems > 0 && (stride_elems * 2) % 16 == 0 &&
                           stride_elems * 2 < (int64_t{1} << 40));
  };
  auto ok = [&](const void* base, int64_t row, int64_t head, int64_t outer) {
    return reinterpret_cast<uintptr_t>(base) % 16 == 0 && aligned(row, 2) &&
           aligned(head, p.hkv) && aligned(outer, outers);
  };
  if (!ok(kv.k, kv.k_row_stride, kv.k_head_stride, kv.k_outer_stride) ||
      !ok(kv.v, kv.v_row_stride, kv.v_head_stride, kv.v_outer_stride))
    return "16-byte aligned K / V and strides";
  return "";
}

// Rows (query tokens x GQA group) up to which the decode kernel is used: it holds them all in one
// CTA per KV head; beyond that the prefill tiles serve.
constexpr int64_t kDecodeMaxRows = 32;

int64_t decode_rows(const AttnProblem& prob) {
  return int64_t{prob.max_seqlen_q} * (prob.hq / prob.hkv);
}

// Whether the mask hides nothing but keys past the sequence end. With one query token (per
// sequence) a causal mask is such a mask: the token sits at the last key.
bool mask_trivial(const AttnProblem& prob) {
  const Mask& m = prob.mask;
  if (m.is_none()) return true;
  return prob.max_seqlen_q <= 1 && m.window_left < 0 && m.window_right >= 0 && m.chunk_size == 0;
}

Policy policy_for(const AttnProblem& prob) {
  // The plain-mod kernels fold a positive scale into exp2 after the row max (prefill_kernel.cuh).
  if (prob.softcap > 0.f || prob.has_alibi || !(prob.scale > 0.f)) return Policy::kFull;
  if (decode_rows(prob) <= kDecodeMaxRows)  // decode has the plain and the generic variants
    return mask_trivial(prob) ? Policy::kPlain : Policy::kFull;
  return prob.mask.is_none() ? Policy::kPlain : Policy::kMask;
}

const Variant* find_variant(const AttnProblem& prob) {
  const Policy pol = policy_for(prob);
  const int64_t rows = decode_rows(prob);
  const int want_rows = rows > kDecodeMaxRows ? 0 : rows <= 16 ? 16 : 32;
  for (const Variant& v : kVariants)
    if (v.dqk == prob.dqk && v.dv == prob.dv && v.dtype == prob.dtype && v.policy == pol &&
        v.decode_rows == want_rows && v.kv_fp8 == prob.kv_fp8)
      return &v;
  return nullptr;
}

// The head dims compiled for (FP8 caches or not), as "64/64, 128/128", in list order.
std::string built_dims(bool kv_fp8) {
  std::string out;
  for (size_t i = 0; i < kVariants.size(); ++i) {
    const Variant& v = kVariants[i];
    bool seen = v.kv_fp8 != kv_fp8;
    for (size_t j = 0; j < i && !seen; ++j)
      seen = kVariants[j].kv_fp8 == kv_fp8 && kVariants[j].dqk == v.dqk && kVariants[j].dv == v.dv;
    if (!seen)
      out += (out.empty() ? "" : ", ") + std::to_string(v.dqk) + "/" + std::to_string(v.dv);
  }
  return out.empty() ? "none" : out;
}

const Variant* find_variant(const std::string& kernel) {
  for (const Variant& v : kVariants) {
    const size_t n = std::strlen(v.name);
    if (kernel.compare(0, n, v.name) == 0 && (kernel.size() == n || kernel[n] == '+')) return &v;
  }
  return nullptr;
}

// The most K/V bytes a call may read: max_seqlen_k keys per sequence, within the tensors' rows.
int64_t kv_bytes_bound(const AttnProblem& prob) {
  int64_t rows = int64_t{prob.batch} * prob.max_seqlen_k;
  switch (prob.kv) {
    case KvLayout::kContiguous: rows = std::min(rows, int64_t{prob.batch} * prob.k_rows); break;
    case KvLayout::kRagged: rows = std::min(rows, prob.k_rows); break;
    case KvLayout::kPaged: rows = std::min(rows, prob.num_pages * prob.page_size()); break;
  }
  return rows * prob.hkv * (prob.dqk + prob.dv) * (prob.kv_fp8 ? 1 : 2);
}

// The decode kernel forms paged K / V offsets within a page in 32 bits and multiplies the page
// index by a 32-bit page stride (decode_kernel.cuh): every stride, and the offset of a page's last
// element, must stay below 2^31 elements (a page of at most 4 GB).
bool paged_offsets_fit_32(const AttentionArgs& a, const AttnProblem& prob) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  auto fits = [&](const TensorView& t, int d) {
    const int64_t outer = t.stride[0], row = t.stride[1], head = t.stride_of(-2);
    if (outer < 0 || row < 0 || head < 0 || outer >= kLimit) return false;
    const int64_t last = (prob.page_size() - 1) * row + (prob.hkv - 1) * head + d;
    return last < kLimit;
  };
  return fits(a.k, prob.dqk) && fits(a.v, prob.dv);
}

// The decode kernel's arrival counters, one per (sequence, KV head), after the partials.
size_t decode_counter_bytes(const AttnProblem& prob, bool decode) {
  return decode ? static_cast<size_t>(prob.batch) * prob.hkv * sizeof(unsigned) : 0;
}

// An FP8 scale in KvOperand's (outer, row, head) coordinates: per (token, KV head) it is shaped
// like the cache without its last dim ([pages, page, Hkv], [B, Sk, Hkv] or ragged [total_k, Hkv]).
void set_scale(FwdParams::KvScale& s, const TensorView& t, KvScaleKind kind, bool ragged) {
  s.data = static_cast<const float*>(t.data);
  s.per_token = kind == KvScaleKind::kToken;
  if (kind == KvScaleKind::kHead) s.head_stride = t.stride[0];
  if (kind == KvScaleKind::kToken) {
    s.outer_stride = ragged ? 0 : t.stride[0];
    s.row_stride = ragged ? t.stride[0] : t.stride[1];
    s.head_stride = t.stride_of(-1);
  }
}

FwdParams make_params(const AttentionArgs& a, const AttnProblem& prob) {
  FwdParams p;
  set_output_params(p, a, prob);
  const bool qr = prob.q_ragged;
  p.q = a.q.data;
  p.q_batch_stride = qr ? 0 : a.q.stride[0];
  p.q_row_stride = qr ? a.q.stride[0] : a.q.stride[1];
  p.q_head_stride = a.q.stride_of(-2);

  gpu::KvOperand& kv = p.kv;
  kv.k = a.k.data;
  kv.v = a.v.data;
  const bool kr = prob.kv == KvLayout::kRagged;
  kv.k_outer_stride = kr ? 0 : a.k.stride[0];
  kv.k_row_stride = kr ? a.k.stride[0] : a.k.stride[1];
  kv.k_head_stride = a.k.stride_of(-2);
  kv.v_outer_stride = kr ? 0 : a.v.stride[0];
  kv.v_row_stride = kr ? a.v.stride[0] : a.v.stride[1];
  kv.v_head_stride = a.v.stride_of(-2);
  switch (prob.kv) {
    case KvLayout::kContiguous:
      kv.kind = gpu::KvKind::kContiguous;
      kv.k_rows = static_cast<int>(prob.k_rows);
      break;
    case KvLayout::kRagged:
      kv.kind = gpu::KvKind::kRagged;
      kv.k_rows = static_cast<int>(prob.k_rows);
      kv.cu_seqlens_k = static_cast<const int32_t*>(a.cu_seqlens_k.data);
      kv.cu_k_stride = a.cu_seqlens_k.stride[0];
      break;
    case KvLayout::kPaged:
      kv.kind = gpu::KvKind::kPaged;
      kv.k_rows = static_cast<int>(prob.max_pages * prob.page_size());
      kv.page_table = static_cast<const int32_t*>(a.page_table.data);
      kv.pt_batch_stride = a.page_table.stride[0];
      kv.pt_col_stride = a.page_table.stride[1];
      kv.num_pages = static_cast<int>(prob.num_pages);
      kv.page_size = gpu::FastDiv(static_cast<int32_t>(prob.page_size()));
      break;
  }
  if (prob.has_seqused_k) {
    kv.seqused_k = static_cast<const int32_t*>(a.seqused_k.data);
    kv.seqused_stride = a.seqused_k.stride[0];
  }

  p.group = gpu::FastDiv(prob.hq / prob.hkv);
  p.scale = prob.scale;
  p.scale_log2 = prob.scale * gpu::kLog2e;
  p.softcap = prob.softcap;
  if (prob.has_alibi) {
    p.alibi = static_cast<const float*>(a.alibi_slopes.data);
    p.alibi_stride = a.alibi_slopes.stride[0];
  }
  p.window_left = prob.mask.window_left;
  p.window_right = prob.mask.window_right;
  p.chunk_size = prob.mask.chunk_size;
  if (prob.kv_fp8) {
    p.kv_fp8 = true;
    set_scale(p.k_scale, a.k_scale, prob.k_scale, kr);
    set_scale(p.v_scale, a.v_scale, prob.v_scale, kr);
  }
  return p;
}

}  // namespace

Status portable_attention_supports(const AttentionArgs& args, const AttnProblem& prob) {
  if (prob.dtype != DType::kBFloat16 && prob.dtype != DType::kFloat16)
    return Status::Unsupported(std::string("portable CUDA attention supports bf16 and fp16, not ") +
                               to_string(prob.dtype));
  if (prob.q_fp8)
    return Status::Unsupported("FP8 queries (fp8e4m3 q) run on the CPU backend only: the CUDA FP8 "
                               "attention kernel is not built yet");
  if (prob.k_scale == KvScaleKind::kBatchHead || prob.v_scale == KvScaleKind::kBatchHead)
    return Status::Unsupported("k_scale / v_scale per (sequence, KV head) [B, Hkv] are read by the "
                               "CPU backend only; CUDA takes [1], [Hkv] or per-token scales");
  if (prob.kv_fp8 && find_variant(prob) == nullptr)
    return Status::Unsupported(
        "portable CUDA attention reads an FP8 KV cache in its decode kernel only: head dims " +
        built_dims(true) + " and at most 32 query rows (max_seqlen_q x group) per KV head; "
        "this call has head dims " + std::to_string(prob.dqk) + "/" + std::to_string(prob.dv) +
        " and " + std::to_string(decode_rows(prob)) + " rows" + kernel_filter_note());
  if (find_variant(prob) == nullptr)
    return Status::Unsupported("portable CUDA attention has no " +
                               std::string(to_string(prob.dtype)) + " kernel for head dims q/k " +
                               std::to_string(prob.dqk) + ", v " + std::to_string(prob.dv) +
                               " (built: " + built_dims(false) + ")" + kernel_filter_note());
  const int64_t k_extent =
      prob.kv == KvLayout::kPaged ? prob.max_pages * prob.page_size() : prob.k_rows;
  if (prob.q_rows > INT32_MAX / 2 || k_extent > INT32_MAX / 2 ||
      int64_t{prob.max_seqlen_q} * (prob.hq / prob.hkv) > INT32_MAX / 2)
    return Status::Unsupported("portable CUDA attention: sequence extents must stay below 2^30");
  if (prob.batch > gpu::kMaxGridYZ)
    return Status::Unsupported("portable CUDA attention: batch " + std::to_string(prob.batch) +
                               " exceeds 65535");
  (void)args;
  return Status::Ok();
}

Status portable_attention_plan(const AttentionArgs& args, const AttnProblem& prob,
                               const CudaDeviceInfo& dev, AttentionPlan* plan,
                               HopperDecode hopper_decode) {
  if (dev.cc_major < 8)
    return Status::Unsupported("portable CUDA attention needs compute capability 8.0 or newer");
  const Variant* v = find_variant(prob);
  if (v == nullptr) return portable_attention_supports(args, prob);
  // Prefill tiles that need more shared memory than the device grants a block give way to the
  // compact ones (sm_86 / sm_89 / sm_120: 99 KB).
  const bool compact = v->decode_rows == 0 && v->smem_bytes > dev.smem_per_block_optin;
  if (dev.smem_per_block_optin < gpu::kCompactSmemBytes)
    return Status::Unsupported("portable CUDA attention needs 99 KB of shared memory per block; "
                               "this device grants " +
                               std::to_string(dev.smem_per_block_optin) + " bytes");
  PlanInput in;
  in.batch = prob.batch;
  in.hkv = prob.hkv;
  in.group = prob.hq / prob.hkv;
  in.max_seqlen_q = prob.max_seqlen_q;
  in.max_seqlen_k = prob.max_seqlen_k;
  const bool masked = v->policy != Policy::kPlain;
  in.block_m = gpu::block_m_for(prob.dqk, prob.dv, !generic(v->policy), masked, compact);
  in.block_n = gpu::block_n_for(prob.dqk, prob.dv, !generic(v->policy), masked, compact);
  in.sm_count = dev.sm_count;
  in.requested_splits = args.num_splits;
  int splits = 0;
  if (v->decode_rows > 0 && prob.kv == KvLayout::kPaged && !paged_offsets_fit_32(args, prob))
    return Status::Unsupported(
        "portable CUDA decode: paged K / V strides and in-page offsets must stay below 2^31 "
        "elements");
  if (v->decode_rows > 0) {
    DecodePlanInput d;
    d.batch = prob.batch;
    d.hkv = prob.hkv;
    d.max_seqlen_k = prob.max_seqlen_k;
    d.block_n = gpu::DecodeTile<128, 128, 1>::kBlockN;
    d.sm_count = dev.sm_count;
    d.requested_splits = args.num_splits;
    d.max_splits = gpu::kMaxDecodeSplits;
    splits = plan_decode_splits(d);
  } else {
    splits = plan_num_splits(in);
  }
  plan->backend = Backend::kCudaPortable;
  // The decode kernel merges its splits itself; prefill runs a combine kernel after.
  const bool l2stream = v->launch_l2stream != nullptr &&
                        decode_l2_stream(kv_bytes_bound(prob), dev.l2_bytes);
  // Hopper: the TMA decode kernel where it pays (or is asked for) and TMA can read this cache.
  const bool wanted = hopper_decode == HopperDecode::kAlways ||
                     (hopper_decode == HopperDecode::kWherePays &&
                      tma_decode_pays(prob.max_seqlen_k, splits));
  const bool tma = wanted && dev.cc_major == 9 && find_tma(*v) != nullptr &&
                   tma_refusal(make_params(args, prob)).empty();
  plan->kernel = std::string(v->name) + (l2stream ? kL2StreamSuffix : "") +
                 (tma ? kTmaSuffix : "") + (compact ? kCompactSuffix : "") +
                 (splits <= 1 ? "" : v->decode_rows > 0 ? "+split_merge" : "+split_combine");
  plan->num_splits = splits;
  plan->workspace_bytes =
      split_workspace(prob, splits, decode_counter_bytes(prob, v->decode_rows > 0)).bytes;
  return Status::Ok();
}

Status portable_attention_forward(const AttentionArgs& args, const AttnProblem& prob,
                                  const ExecOptions& opts, const AttentionPlan& plan) {
  if (plan.backend != Backend::kCudaPortable)
    return Status::Invalid("plan was made for another backend");
  const Variant* v = find_variant(plan.kernel);
  if (v == nullptr || v->dqk != prob.dqk || v->dv != prob.dv || v->dtype != prob.dtype ||
      v->kv_fp8 != prob.kv_fp8)
    return Status::Invalid("plan (kernel '" + plan.kernel + "') does not match these arguments");
  if (!generic(v->policy) && (prob.softcap > 0.f || prob.has_alibi || !(prob.scale > 0.f)))
    return Status::Invalid("plan (kernel '" + plan.kernel +
                           "') lacks the softcap / ALiBi / non-positive scale these arguments need");
  if (v->policy == Policy::kPlain && !(v->decode_rows > 0 ? mask_trivial(prob) : prob.mask.is_none()))
    return Status::Invalid("plan (kernel '" + plan.kernel + "') has no mask, these arguments do");
  if (v->decode_rows > 0 && decode_rows(prob) > v->decode_rows)
    return Status::Invalid("plan (kernel '" + plan.kernel + "') holds " +
                           std::to_string(v->decode_rows) +
                           " query rows per KV head, these arguments have " +
                           std::to_string(decode_rows(prob)));
  if (v->decode_rows > 0 && prob.kv == KvLayout::kPaged && !paged_offsets_fit_32(args, prob))
    return Status::Invalid("plan (kernel '" + plan.kernel +
                           "'): paged K / V strides too large for the decode kernel");
  const bool l2stream = plan.kernel.find(kL2StreamSuffix) != std::string::npos;
  if (l2stream && v->launch_l2stream == nullptr)
    return Status::Invalid("plan (kernel '" + plan.kernel + "') asks for an L2-streaming twin '" +
                           v->name + "' does not have");
  const bool tma = plan.kernel.find(kTmaSuffix) != std::string::npos;
  if (tma && find_tma(*v) == nullptr)
    return Status::Invalid("plan (kernel '" + plan.kernel + "') asks for a Hopper decode kernel '" +
                           v->name + "' does not have in this build");
  const int splits = std::max(plan.num_splits, 1);
  if (v->decode_rows == 0 && splits > 1 && int64_t{prob.hkv} * splits > gpu::kMaxGridYZ)
    return Status::Invalid("plan num_splits too large for these kv heads");
  const bool compact = plan.kernel.find(kCompactSuffix) != std::string::npos;
  if (v->decode_rows == 0 && !compact && v->smem_bytes > gpu::kCompactSmemBytes) {
    CudaDeviceInfo dev;
    ATTNKIT_RETURN_IF_ERROR(cuda_device_info(prob.device.index, &dev));
    if (v->smem_bytes > dev.smem_per_block_optin)
      return Status::Invalid("plan (kernel '" + plan.kernel + "') needs " +
                             std::to_string(v->smem_bytes) +
                             " bytes of shared memory per block, more than this device grants; "
                             "plan on this device");
  }
  if (prob.batch == 0 || prob.q_rows == 0) return Status::Ok();

  DeviceGuard guard(prob.device.index);
  if (!guard.ok()) return Status::Cuda("cannot select cuda:" + std::to_string(prob.device.index));
  const auto stream = static_cast<cudaStream_t>(opts.stream);

  FwdParams p = make_params(args, prob);
  p.num_splits = splits;
  if (tma) {
    const std::string why = tma_refusal(p);
    if (!why.empty())
      return Status::Invalid("plan (kernel '" + plan.kernel + "') reads K / V by TMA, which needs " +
                             why + "; plan again for these tensors");
  }
  void* owned = nullptr;
  if (splits > 1) {
    const SplitWorkspace layout =
        split_workspace(prob, splits, decode_counter_bytes(prob, v->decode_rows > 0));
    void* ws = nullptr;
    ATTNKIT_RETURN_IF_ERROR(acquire_split_workspace(opts, layout.bytes, stream, &ws, &owned));
    p.part_o = static_cast<float*>(ws);
    p.part_lse = reinterpret_cast<float*>(static_cast<char*>(ws) + layout.lse_offset);
    p.part_rows = split_part_rows(prob);
    if (v->decode_rows > 0)
      p.split_counters = reinterpret_cast<unsigned*>(static_cast<char*>(ws) + layout.counters_offset);
  }
  const Status st = [&]() -> Status {
    // The decode kernel merges its own splits.
    if (tma) {
      ATTNKIT_RETURN_IF_ERROR(find_tma(*v)(p, l2stream, opts.stream));
      return Status::Ok();
    }
    auto launch = l2stream ? v->launch_l2stream : v->launch;
    if (compact && v->launch_compact != nullptr) launch = v->launch_compact;
    ATTNKIT_RETURN_IF_ERROR(launch(p, opts.stream));
    if (splits > 1 && v->decode_rows == 0)
      ATTNKIT_RETURN_IF_ERROR(
          gpu::launch_split_combine(p, prob.dtype == DType::kBFloat16, prob.dv, stream));
    return Status::Ok();
  }();
  return release_split_workspace(owned, stream, st);
}

}  // namespace attnkit::detail
