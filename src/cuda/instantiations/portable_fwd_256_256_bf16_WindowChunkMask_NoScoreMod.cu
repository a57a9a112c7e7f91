// One portable attention variant (see portable_fwd_list.h).
#include "cuda/attention/portable/fwd_launch.cuh"

ATTNKIT_DEFINE_PORTABLE_FWD(256, 256, bf16, WindowChunkMask, NoScoreMod, prefill)
