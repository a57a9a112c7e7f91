// One portable attention variant (see portable_fwd_list.h).
#include "cuda/attention/portable/fwd_launch.cuh"

ATTNKIT_DEFINE_PORTABLE_FWD(192, 128, fp16, WindowChunkMask, SoftcapAlibiMod, prefill)
