// Host side of the Hopper prefill: TMA descriptors, kernel parameters, launch. Included only by the
// instantiation TUs (src/cuda/instantiations/sm90_fwd_d*.cu), which exist in sm_90a builds only.
//
// The TMA descriptors are encoded by CuTe through cuTensorMapEncodeTiled, which CUTLASS reaches
// through the runtime's cudaGetDriverEntryPoint (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL is left
// undefined), so the library never links libcuda.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "attnkit/status.h"
#include "cuda/attention/sm90/sm90_fwd_params.h"
#include "cuda/common/cuda_check.h"
#include "cuda/instantiations/sm90_fwd_list.h"

#if defined(ATTNKIT_HAS_SM90A)
#if defined(CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL)
#error "attnkit must not call the CUDA driver directly (libattnkit must load without libcuda)"
#endif
#include "cuda/attention/sm90/sm90_fwd_kernel.cuh"

namespace attnkit::gpu::sm90 {

// Rows of O rescaled only when their max grows by more than 2^8 (see FwdKernelParams).
constexpr float kRescaleSlackLog2 = 8.f;

template <class Cfg, class Sched>
Status launch_fwd(const Sm90FwdArgs& a, cudaStream_t stream) {
  constexpr int kHeadDim = Cfg::kHeadDim;
  using Element = typename Cfg::Element;
  using Params = FwdKernelParams<Cfg, Sched>;
  // TMA wants every global stride a multiple of 16 bytes, even for extents of 1 whose stride is
  // never used: those get the (already aligned) row stride.
  auto fix = [](int64_t stride, int extent, int64_t row) { return extent == 1 ? row : stride; };
  auto q = make_tensor(make_gmem_ptr(static_cast<const Element*>(a.q)),
                       make_shape(a.sq, Int<kHeadDim>{}, a.hq, a.batch),
                       make_stride(a.q_row, _1{}, fix(a.q_head, a.hq, a.q_row),
                                   fix(a.q_batch, a.batch, a.q_row)));
  auto k = make_tensor(make_gmem_ptr(static_cast<const Element*>(a.k)),
                       make_shape(a.sk, Int<kHeadDim>{}, a.hkv, a.batch),
                       make_stride(a.k_row, _1{}, fix(a.k_head, a.hkv, a.k_row),
                                   fix(a.k_batch, a.batch, a.k_row)));
  auto vt = make_tensor(make_gmem_ptr(static_cast<const Element*>(a.v)),
                        make_shape(Int<kHeadDim>{}, a.sk, a.hkv, a.batch),
                        make_stride(_1{}, a.v_row, fix(a.v_head, a.hkv, a.v_row),
                                    fix(a.v_batch, a.batch, a.v_row)));
  Sched sched;
  sched.num_m_blocks = (a.sq + Cfg::kBlockM - 1) / Cfg::kBlockM;
  sched.num_heads = a.hq;
  sched.num_batch = a.batch;
  const int64_t num_tiles = int64_t{sched.num_m_blocks} * a.hq * a.batch;
  if (num_tiles >= (int64_t{1} << 30))
    return Status::Unsupported("sm90 attention: 2^30 or more work tiles");
  // The scheduler sizes the grid: persistent (one CTA per SM, as shared memory allows no more)
  // or one CTA per tile.
  int device = 0, sms = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&device));
  ATTNKIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  Params p{make_tma_copy(SM90_TMA_LOAD{}, q, typename Cfg::SmemLayoutQ{}),
           make_tma_copy(SM90_TMA_LOAD{}, k, take<0, 2>(typename Cfg::SmemLayoutK{})),
           make_tma_copy(SM90_TMA_LOAD{}, vt, take<0, 2>(typename Cfg::SmemLayoutVt{})),
           static_cast<Element*>(a.o), a.o_batch, a.o_row, a.o_head,
           a.lse, a.lse_batch, a.lse_row, a.lse_head,
           a.sq, a.sk, a.hq, a.hkv, a.hq / a.hkv, sched,
           a.scale * 1.4426950408889634f, kRescaleSlackLog2, a.pingpong ? 1 : 0};

  auto kernel = &sm90_fwd_kernel<Cfg, Sched>;
  constexpr int kSmem = static_cast<int>(sizeof(SharedStorage<Cfg>));
  static_assert(kSmem <= 227 * 1024, "shared memory exceeds the 227 KB a Hopper CTA can have");
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>(Sched::grid(static_cast<int>(num_tiles), sms)));
  kernel<<<grid, Cfg::kThreads, kSmem, stream>>>(p);
  ATTNKIT_CUDA_CHECK_LAUNCH("sm90_fwd_kernel");
  return Status::Ok();
}

// The variant's configuration and scheduler (sm90_tile_scheduler.h). Causal at d128: one CTA per
// tile, longest first, unless the plan asked for the persistent grid (short sequences, where
// per-CTA start-up costs dominate). Causal at d256 stays one CTA per tile: persistent (with N=80
// tiles) measured 0.67-0.89x of it at 512 to 2k rows (H100).
template <class Element, int kHeadDim, bool kCausal>
Status run_fwd(const Sm90FwdArgs& a, cudaStream_t stream) {
  using Cfg = FwdConfig<Element, kHeadDim, kCausal>;
  if constexpr (kCausal && kHeadDim == 128) {
    if (a.persistent) return launch_fwd<Cfg, PersistentLongestFirstScheduler>(a, stream);
    return launch_fwd<Cfg, LongestFirstScheduler>(a, stream);
  } else {
    return launch_fwd<Cfg, SchedulerFor<kHeadDim, kCausal>>(a, stream);
  }
}

}  // namespace attnkit::gpu::sm90

#define ATTNKIT_SM90_ELEMENT_bf16 cutlass::bfloat16_t
#define ATTNKIT_SM90_ELEMENT_fp16 cutlass::half_t
#define ATTNKIT_SM90_CAUSAL_none false
#define ATTNKIT_SM90_CAUSAL_causal true

#define ATTNKIT_DEFINE_SM90_FWD(D, DT, MASK)                                                  \
  namespace attnkit::gpu {                                                                    \
  Status sm90_fwd_d##D##_##DT##_##MASK(const Sm90FwdArgs& a, cudaStream_t stream) {           \
    return sm90::run_fwd<ATTNKIT_SM90_ELEMENT_##DT, D, ATTNKIT_SM90_CAUSAL_##MASK>(a, stream); \
  }                                                                                           \
  }

#else  // no sm_90a target in this build: the dispatcher never calls these.

#define ATTNKIT_DEFINE_SM90_FWD(D, DT, MASK)                                          \
  namespace attnkit::gpu {                                                            \
  Status sm90_fwd_d##D##_##DT##_##MASK(const Sm90FwdArgs&, cudaStream_t) {            \
    return Status::Unsupported("this attnkit build has no sm_90a target");             \
  }                                                                                   \
  }

#endif
