"""When an entry point may call an op's implementation directly instead of through the
torch.library dispatcher.

The dispatcher costs about 20 microseconds per call on a current host CPU, as much as a whole
plain SDPA call, and in plain eager inference it only forwards to the same implementation. It
is needed, and taken, whenever it has more to do: autograd (an input requires grad with grad
mode on), torch.compile / torch.export tracing, TorchScript tracing, functorch transforms
(vmap, grad), a torch function or dispatch mode (FakeTensorMode, opcheck, ...), tensor
subclasses, and the profiler (whose traces then name the op).
"""

import torch
from torch.utils import _python_dispatch


def direct_call_ok(*tensors):
    """Whether the dispatcher would only forward a call on these tensors (None entries are
    absent optional tensors)."""
    if torch.compiler.is_compiling() or torch._C._get_tracing_state() is not None:
        return False
    if torch._C._are_functorch_transforms_active() or torch._C._is_torch_function_mode_enabled():
        return False
    if _python_dispatch._get_current_dispatch_mode() is not None:
        return False
    if torch._C._autograd._profiler_enabled():
        return False
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is None:
            continue
        if type(t) is not torch.Tensor or (grad and t.requires_grad):
            return False
    return True
