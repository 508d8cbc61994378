// Explicit instantiation: fp16, head dim 96.
#include "kernels/sm90/fwd_launch.cuh"

template void flashsplit::sm90::launch_attn_fwd<gpu_fp16_t, 96>(const flashsplit::AttnFwdParams&,
                                                          const flashsplit::LaunchPlan&,
                                                          gpuStream_t, flashsplit::LaunchRecord*);
