// Explicit instantiation: bf16, head dim 96.
#include "kernels/sm80/fwd_launch.cuh"

template void flashsplit::sm80::launch_attn_fwd<gpu_bf16_t, 96>(const flashsplit::AttnFwdParams&,
                                                          const flashsplit::LaunchPlan&,
                                                          gpuStream_t, flashsplit::LaunchRecord*);
