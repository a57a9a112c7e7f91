// The WGMMA fused state pass + chunk output for bf16 q/k/v: clusters of 2 CTA(s), 32 value columns
// per CTA.
#if defined(ATTNKIT_HAS_SM90A)
#include "cuda/gdn/gdn_state_output_sm90_launch.cuh"
ATTNKIT_GDN_SO_SM90_DEFINE(bf16, cutlass::bfloat16_t, 2, 32)
#endif
