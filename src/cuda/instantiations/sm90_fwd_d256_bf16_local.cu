// Hopper prefill, head dim 256, bf16: the run-time masks (sliding window, chunked), alone, with softcap
// and with learned sinks (see sm90_fwd_list.h).
#include "cuda/attention/sm90/sm90_fwd_launch.cuh"

ATTNKIT_DEFINE_SM90_FWD(256, bf16, local)
ATTNKIT_DEFINE_SM90_FWD(256, bf16, local_softcap)
ATTNKIT_DEFINE_SM90_FWD(256, bf16, local_sinks)
