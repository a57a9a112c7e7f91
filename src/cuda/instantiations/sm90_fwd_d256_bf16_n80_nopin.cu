// Hopper prefill, head dim 256, bf16, no mask, 80-key tiles, without the softmax pin: a temporary
// same-call A/B (see sm90_fwd_list.h).
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"

ATTNKIT_DEFINE_SM90_FWD(256, bf16, none_n80_nopin)
