// Hopper prefill, head dim 64, bf16, no mask and causal without the softmax pin: a temporary
// same-call A/B (see sm90_fwd_list.h).
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"

ATTNKIT_DEFINE_SM90_FWD(64, bf16, none_nopin)
ATTNKIT_DEFINE_SM90_FWD(64, bf16, causal_nopin)
