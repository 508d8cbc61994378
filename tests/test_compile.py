"""torch.compile(fullgraph=True) traces flash_attn_func as one op, forward and backward, and
the op registrations pass torch.library.opcheck."""

import copy

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from flashsplit import flash_attn_func


class _TinyAttention(torch.nn.Module):
    def __init__(self, dim=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q_proj = torch.nn.Linear(dim, dim)
        self.kv_proj = torch.nn.Linear(dim, 2 * kv_heads * self.head_dim)
        self.out_proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim)
        k, v = self.kv_proj(x).view(b, s, 2, self.kv_heads, self.head_dim).unbind(dim=2)
        out, lse, _ = flash_attn_func(q, k, v, causal=True, softcap=8.0, window_size=(5, -1),
                                      return_attn_probs=True)
        return self.out_proj(out.reshape(b, s, -1)), lse


def _loss(result):
    out, lse = result
    return out.square().mean() + lse.mean()


def test_compiled_module_matches_eager_forward_and_backward():
    torch._dynamo.reset()
    eager = _TinyAttention()
    compiled_module = copy.deepcopy(eager)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(compiled_module, backend=counter, fullgraph=True)
    x = torch.randn(2, 11, 32)

    eager_result = eager(x)
    compiled_result = compiled(x)
    assert counter.frame_count == 1  # one graph: no graph break anywhere
    for e, c in zip(eager_result, compiled_result):
        torch.testing.assert_close(c, e, rtol=0, atol=1e-6)

    _loss(eager_result).backward()
    _loss(compiled_result).backward()
    for (name, p_eager), p_compiled in zip(eager.named_parameters(),
                                           compiled_module.parameters()):
        assert p_eager.grad is not None and torch.isfinite(p_eager.grad).all(), name
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, rtol=1e-5, atol=1e-6,
                                   msg=name)


def test_compiled_with_dynamic_shapes_matches_eager():
    # dynamic=True makes sizes (and may make floats) symbolic: the validation must trace too.
    for options in [{"causal": True}, {"causal": True, "softcap": 5.0, "softmax_scale": 0.3}]:
        torch._dynamo.reset()
        fn = torch.compile(lambda q, k, v: flash_attn_func(q, k, v, **options),
                           backend="aot_eager", fullgraph=True, dynamic=True)
        for sq, sk in [(5, 9), (7, 12)]:
            q, k = torch.randn(2, sq, 4, 8), torch.randn(2, sk, 2, 8)
            v = torch.randn(2, sk, 2, 8)
            torch.testing.assert_close(fn(q, k, v), flash_attn_func(q, k, v, **options),
                                       rtol=0, atol=1e-6)


def test_compiled_call_still_falls_back_and_strict_still_raises():
    torch._dynamo.reset()
    q, k, v = (torch.randn(1, 5, 2, 8) for _ in range(3))
    fn = torch.compile(lambda q, k, v: flash_attn_func(q, k, v, causal=True),
                       backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(fn(q, k, v), flash_attn_func(q, k, v, causal=True),
                               rtol=0, atol=1e-6)
    strict_fn = torch.compile(lambda q, k, v: flash_attn_func(q, k, v, strict=True),
                              backend="aot_eager", fullgraph=True)
    with pytest.raises(RuntimeError, match="CPU|cpu"):
        strict_fn(q, k, v)


def _fwd_args(dtype, requires_grad):
    q = torch.randn(2, 5, 4, 8, dtype=dtype, requires_grad=requires_grad)
    k = torch.randn(2, 7, 2, 8, dtype=dtype, requires_grad=requires_grad)
    v = torch.randn(2, 7, 2, 8, dtype=dtype, requires_grad=requires_grad)
    return q, k, v


@pytest.mark.parametrize("alibi", [False, True])
def test_opcheck_fwd(alibi):
    q, k, v = _fwd_args(torch.float32, requires_grad=True)
    slopes = torch.rand(4) if alibi else None
    args = (q, k, v, 0.35, True, 3, -1, 2.0, slopes, 0.0, 0, 0, False)
    torch.library.opcheck(torch.ops.flashsplit.fwd.default, args)


def test_opcheck_bwd():
    q, k, v = _fwd_args(torch.float32, requires_grad=False)
    out, lse = torch.ops.flashsplit.fwd(q, k, v, 0.35, False, -1, -1, 0.0, None, 0.0, 0, 0,
                                        False)
    args = (torch.randn_like(out), torch.randn_like(lse), q, k, v, lse, 0.35, False, -1, -1,
            0.0, None, 0.0, 0)
    torch.library.opcheck(torch.ops.flashsplit.bwd.default, args)


def test_compiled_dropout_draws_the_same_seed_as_eager():
    # The seed is drawn with Tensor.item() from torch's default generator; under fullgraph=True
    # Dynamo captures that draw, so compiled and eager calls after the same manual_seed agree,
    # forward and backward, and successive calls still get fresh masks.
    torch._dynamo.reset()
    q, k, v = (torch.randn(1, 70, 2, 8, requires_grad=True) for _ in range(3))
    eager = lambda q, k, v: flash_attn_func(q, k, v, dropout_p=0.3, causal=True)
    compiled = torch.compile(eager, backend="aot_eager", fullgraph=True)
    torch.manual_seed(3)
    first, second = compiled(q, k, v), compiled(q, k, v)
    torch.manual_seed(3)
    reference = eager(q, k, v)
    assert not torch.equal(first, second)
    torch.testing.assert_close(first, reference, rtol=0, atol=1e-6)
    dout = torch.randn_like(first)
    for g, r in zip(torch.autograd.grad(first, (q, k, v), dout),
                    torch.autograd.grad(reference, (q, k, v), dout)):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)
