// One portable attention variant, on the split-N decode tile (see portable_fwd_list.h).
#include "cuda/attention/portable/fwd_launch.cuh"

ATTNKIT_DEFINE_PORTABLE_FWD(96, 96, fp16, WindowChunkMask, SoftcapAlibiMod, decode)
