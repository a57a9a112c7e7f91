// Hopper prefill, head dims 96, bf16, no mask and causal (see sm90_fwd_list.h).
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"

ATTNKIT_DEFINE_SM90_FWD(96, bf16, none)
ATTNKIT_DEFINE_SM90_FWD(96, bf16, causal)
