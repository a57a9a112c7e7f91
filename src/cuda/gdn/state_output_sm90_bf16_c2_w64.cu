// The WGMMA fused state pass + chunk output for bf16 q/k/v: clusters of 2 CTAs, 64 value columns per
// CTA (the wide variant).
#if defined(ATTNKIT_HAS_SM90A)
#include "cuda/gdn/gdn_state_output_sm90_launch.cuh"
ATTNKIT_GDN_SO_SM90_DEFINE_LAUNCH(bf16, cutlass::bfloat16_t, 2, 64)
#endif
