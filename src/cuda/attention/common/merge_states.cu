// merge_states on the GPU (the public op): one warp per (row, head), any strides, fp32 / fp16 /
// bf16 in and out. Same math as the split-KV combine (combine_kernel.cuh).
#include <cuda_runtime.h>

#include "api/backends.h"
#include "cuda/attention/common/combine_kernel.cuh"
#include "cuda/common/cuda_check.h"

namespace attnkit::detail {
namespace {

template <typename TIn, typename TOut>
Status launch_merge(const MergeStatesArgs& a, const MergeProblem& prob, cudaStream_t stream) {
  gpu::MergeView<TIn, TOut> v;
  v.o_parts = static_cast<const TIn*>(a.o_parts.data);
  v.on = a.o_parts.stride[0];
  v.ot = a.o_parts.stride[1];
  v.oh = a.o_parts.stride[2];
  v.lse_parts = static_cast<const float*>(a.lse_parts.data);
  v.ln = a.lse_parts.stride[0];
  v.lt = a.lse_parts.stride[1];
  v.lh = a.lse_parts.stride[2];
  v.o = static_cast<TOut*>(a.o.data);
  v.o_t = a.o.stride[0];
  v.o_h = a.o.stride[1];
  v.lse = a.lse.defined() ? static_cast<float*>(a.lse.data) : nullptr;
  v.lse_t = a.lse.defined() ? a.lse.stride[0] : 0;
  v.lse_h = a.lse.defined() ? a.lse.stride[1] : 0;
  v.n = static_cast<int>(prob.n);
  v.d = static_cast<int>(prob.d);
  const int64_t warps = prob.t * prob.h;
  if (warps == 0) return Status::Ok();
  const int64_t blocks = (warps + 3) / 4;
  if (blocks > INT32_MAX) return Status::Unsupported("merge_states: too many rows for one launch");
  gpu::merge_states_kernel<TIn, TOut><<<static_cast<unsigned>(blocks), 128, 0, stream>>>(
      v, prob.t, static_cast<int>(prob.h));
  ATTNKIT_CUDA_CHECK_LAUNCH("merge_states_kernel");
  return Status::Ok();
}

template <typename TIn>
Status launch_merge_out(const MergeStatesArgs& a, const MergeProblem& prob, cudaStream_t s) {
  switch (a.o.dtype) {
    case DType::kFloat32: return launch_merge<TIn, float>(a, prob, s);
    case DType::kFloat16: return launch_merge<TIn, __half>(a, prob, s);
    case DType::kBFloat16: return launch_merge<TIn, __nv_bfloat16>(a, prob, s);
    default: return Status::Invalid("merge_states: o must be fp32, fp16 or bf16");
  }
}

}  // namespace

Status cuda_merge_states(const MergeStatesArgs& args, const MergeProblem& prob,
                         const ExecOptions& opts) {
  if (prob.n > INT32_MAX || prob.d > INT32_MAX || prob.h > INT32_MAX)
    return Status::Unsupported("merge_states: dimensions must fit in int32");
  int prev = 0;
  ATTNKIT_CUDA_TRY(cudaGetDevice(&prev));
  ATTNKIT_CUDA_TRY(cudaSetDevice(prob.device.index));
  const auto s = static_cast<cudaStream_t>(opts.stream);
  const Status st = [&] {
    switch (args.o_parts.dtype) {
      case DType::kFloat32: return launch_merge_out<float>(args, prob, s);
      case DType::kFloat16: return launch_merge_out<__half>(args, prob, s);
      case DType::kBFloat16: return launch_merge_out<__nv_bfloat16>(args, prob, s);
      default: return Status::Invalid("merge_states: o_parts must be fp32, fp16 or bf16");
    }
  }();
  cudaSetDevice(prev);
  return st;
}

}  // namespace attnkit::detail
