// Host side of the sm90 fused state pass + chunk output (gdn_state_output_sm90.cuh): the launch
// configuration, how many clusters of a variant fit on the device, the launch with its TMA
// descriptors, and the macro that instantiates one variant (state_output_sm90_*.cu).
#pragma once

#include <cuda_runtime.h>

#include <cute/tensor.hpp>

#include <cstdint>
#include <mutex>

#include "attnkit/status.h"
#include "cuda/common/cuda_check.h"
#include "cuda/gdn/gdn_kernels.h"
#include "cuda/gdn/gdn_state_output_sm90.cuh"

namespace attnkit::gdn_cuda::sm90 {

using namespace cute;

// A plain launch: as a programmatic dependent of the intra kernel (griddepcontrol, its set-up
// overlapping the intra kernel's last wave) the forward gained little at T = 16k and lost on
// uneven sequences.
template <class Cfg>
cudaLaunchConfig_t so_launch_config(dim3 grid, cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = sizeof(SoSmem<Cfg>);
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = Cfg::kCluster;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// How many clusters of the kCluster variant fit on the device at once (cached per device).
template <class E, int kCluster, int kCols>
Status max_active_clusters(int* out) {
  using Cfg = SoCfg<E, kCluster, kCols>;
  static std::mutex mu;
  static int cache[64] = {};
  int device = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  if (device < 64 && cache[device] > 0) {
    *out = cache[device];
    return Status::Ok();
  }
  auto kernel = &state_output_sm90_kernel<Cfg>;
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(sizeof(SoSmem<Cfg>))));
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = so_launch_config<Cfg>(dim3(kCluster, 1, 1), nullptr, &attr);
  int n = 0;
  ATTNKIT_CUDA_TRY(cudaOccupancyMaxActiveClusters(&n, kernel, &cfg));
  if (n <= 0) return Status::Internal("gdn sm90 state/output: no cluster of the kernel fits on the device");
  if (device < 64) cache[device] = n;
  *out = n;
  return Status::Ok();
}

template <class E, int kCluster, int kCols>
Status launch_so(const StateOutParams& sp, const SeqLayout& L, cudaStream_t stream) {
  using Cfg = SoCfg<E, kCluster, kCols>;
  const int rows = static_cast<int>(L.T);
  const int batches = L.varlen ? 1 : L.N;
  // TMA wants every global stride a multiple of 16 bytes, also for extents of 1 whose stride is
  // never used: those get the (aligned) row stride.
  auto fix = [](int64_t stride, int extent, int64_t row) { return extent == 1 ? row : stride; };
  auto rows_t = [&](const Tok& t, int heads, auto d) {
    return make_tensor(make_gmem_ptr(static_cast<const E*>(t.p)), make_shape(rows, d, heads, batches),
                       make_stride(t.st, _1{}, fix(t.sh, heads, t.st), fix(t.sb, batches, t.st)));
  };
  auto kt = make_tensor(make_gmem_ptr(static_cast<const E*>(sp.k.p)), make_shape(_128{}, rows, sp.H, batches),
                        make_stride(_1{}, sp.k.st, fix(sp.k.sh, sp.H, sp.k.st), fix(sp.k.sb, batches, sp.k.st)));
  const int heads_g = static_cast<int>(sp.g_cum.st);  // the padded head count
  auto g = make_tensor(make_gmem_ptr(static_cast<const float*>(sp.g_cum.p)), make_shape(heads_g, rows, batches),
                       make_stride(_1{}, sp.g_cum.st, fix(sp.g_cum.sb, batches, sp.g_cum.st)));
  const bool o_pair = (reinterpret_cast<uintptr_t>(sp.o.p) & 3) == 0 && sp.o.sb % 2 == 0 && sp.o.st % 2 == 0 &&
                      sp.o.sh % 2 == 0;
  // Whole chunks' outputs go out by TMA where o's rows are 16-byte aligned; otherwise the
  // descriptor (never used then) is built over v, which always is.
  const bool o_tma = rows_aligned16(sp.o);
  const Tok& o_desc = o_tma ? sp.o : sp.v;
  auto o_t = make_tensor(make_gmem_ptr(static_cast<E*>(o_desc.p)), make_shape(rows, _128{}, sp.HV, batches),
                         make_stride(o_desc.st, _1{}, fix(o_desc.sh, sp.HV, o_desc.st), fix(o_desc.sb, batches, o_desc.st)));
  using Shared = typename Cfg::SharedLoad;
  const SoParams<Cfg> p{
      make_tma_copy(Shared{}, rows_t(sp.q, sp.H, _128{}), typename Cfg::LayRowsD{}, Int<kCluster>{}),
      make_tma_copy(Shared{}, rows_t(sp.tu, sp.HV, _64{}), typename Cfg::LayP{}, Int<kCluster>{}),
      make_tma_copy(SM90_TMA_LOAD{}, rows_t(sp.v, sp.HV, _128{}), typename Cfg::LayU{}),
      make_tma_copy(Shared{}, rows_t(sp.pm, sp.HV, _64{}), typename Cfg::LayP{}, Int<kCluster>{}),
      make_tma_copy(Shared{}, kt, typename Cfg::LayKt{}, Int<kCluster>{}),
      make_tma_copy(SM90_TMA_LOAD{}, g, typename Cfg::LayG{}),
      rows, batches, sp.H, sp.HV, sp.HV / sp.H, heads_g, L,
      static_cast<E*>(sp.o.p), sp.o.sb, sp.o.st, sp.o.sh, o_pair ? 1 : 0,
      make_tma_copy(SM90_TMA_STORE{}, o_t, typename Cfg::LayO16{}), o_tma ? 1 : 0,
      sp.init, sp.fin, sp.scale};
  auto kernel = &state_output_sm90_kernel<Cfg>;
  constexpr int kSmem = static_cast<int>(sizeof(SoSmem<Cfg>));
  static_assert(kSmem <= 227 * 1024, "shared memory exceeds the 227 KB a Hopper CTA can have");
  ATTNKIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = so_launch_config<Cfg>(dim3(kHead / kCols, sp.HV, L.N), stream, &attr);
  ATTNKIT_CUDA_TRY(cudaLaunchKernelEx(&cfg, kernel, p));
  ATTNKIT_CUDA_CHECK_LAUNCH("gdn fused state pass + output (sm90)");
  return Status::Ok();
}

}  // namespace attnkit::gdn_cuda::sm90

// One translation unit per (dtype, cluster size, value columns) instantiates the kernel
// (state_output_sm90_*.cu): its launch, and for the narrow variants, whose fit the dispatch reads,
// how many of their clusters fit.
#define ATTNKIT_GDN_SO_SM90_DEFINE_LAUNCH(DT, E, C, W)                                                \
  namespace attnkit::gdn_cuda {                                                                      \
  Status so_sm90_launch_##DT##_c##C##_w##W(const StateOutParams& p, const SeqLayout& L, cudaStream_t s) { \
    return sm90::launch_so<E, C, W>(p, L, s);                                                        \
  }                                                                                                  \
  }
#define ATTNKIT_GDN_SO_SM90_DEFINE(DT, E, C, W)                                                       \
  ATTNKIT_GDN_SO_SM90_DEFINE_LAUNCH(DT, E, C, W)                                                     \
  namespace attnkit::gdn_cuda {                                                                      \
  Status so_sm90_fit_##DT##_c##C##_w##W(int* n) { return sm90::max_active_clusters<E, C, W>(n); }    \
  }
