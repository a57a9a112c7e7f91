// Hopper prefill, head dim 64, fp16, over a paged KV cache: no mask, causal and the run-time masks
// (see sm90_fwd_list.h).
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"

ATTNKIT_DEFINE_SM90_FWD(64, fp16, paged_none)
ATTNKIT_DEFINE_SM90_FWD(64, fp16, paged_causal)
ATTNKIT_DEFINE_SM90_FWD(64, fp16, paged_local)
