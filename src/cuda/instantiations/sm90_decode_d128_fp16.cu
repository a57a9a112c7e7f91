// The Hopper decode variants of head dim 128, fp16 (see sm90_decode_list.h).
#include "cuda/attention/sm90/sm90_decode_launch.cuh"

ATTNKIT_DEFINE_SM90_DECODE(128, fp16, NoMask, NoScoreMod, 16)
ATTNKIT_DEFINE_SM90_DECODE(128, fp16, NoMask, NoScoreMod, 32)
ATTNKIT_DEFINE_SM90_DECODE(128, fp16, WindowChunkMask, SoftcapAlibiMod, 16)
ATTNKIT_DEFINE_SM90_DECODE(128, fp16, WindowChunkMask, SoftcapAlibiMod, 32)
