// The portable decode variants of head dims 64/64, fp16 queries, over an FP8 (e4m3) KV cache
// (see portable_decode_list.h).
#include "cuda/attention/portable/decode_launch.cuh"

ATTNKIT_DEFINE_PORTABLE_DECODE_FP8(64, 64, fp16, NoMask, NoScoreMod, 16)
ATTNKIT_DEFINE_PORTABLE_DECODE_FP8(64, 64, fp16, NoMask, NoScoreMod, 32)
ATTNKIT_DEFINE_PORTABLE_DECODE_FP8(64, 64, fp16, WindowChunkMask, SoftcapAlibiMod, 16)
ATTNKIT_DEFINE_PORTABLE_DECODE_FP8(64, 64, fp16, WindowChunkMask, SoftcapAlibiMod, 32)
