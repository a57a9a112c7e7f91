// The WGMMA fused state pass + chunk output for fp16 q/k/v: clusters of 2 CTA(s), 32 value columns
// per CTA.
#if defined(ATTNKIT_HAS_SM90A)
#include "cuda/gdn/gdn_state_output_sm90_launch.cuh"
ATTNKIT_GDN_SO_SM90_DEFINE(fp16, cutlass::half_t, 2, 32)
#endif
