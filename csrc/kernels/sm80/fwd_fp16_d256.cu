// Explicit instantiation: fp16, head dim 256.
#include "kernels/sm80/fwd_launch.cuh"

template void flashsplit::sm80::launch_attn_fwd<gpu_fp16_t, 256>(const flashsplit::AttnFwdParams&,
                                                          const flashsplit::LaunchPlan&,
                                                          gpuStream_t, flashsplit::LaunchRecord*);
