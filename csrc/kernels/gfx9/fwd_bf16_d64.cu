// Explicit instantiation: bf16, head dim 64.
#include "kernels/gfx9/fwd_launch.cuh"

template void flashsplit::gfx9::launch_attn_fwd<gpu_bf16_t, 64>(const flashsplit::AttnFwdParams&,
                                                          const flashsplit::LaunchPlan&,
                                                          gpuStream_t, flashsplit::LaunchRecord*);
