"""flash-linear-attention's Gated DeltaNet interface (fla.ops.gated_delta_rule, fla-core 0.6.0) on
attnkit's kernels: change `from fla.ops.gated_delta_rule import ...` to
`from attnkit.fla import ...`.

Same argument names, order, defaults, layouts and returns: q, k [B, T, H, K]; v [B, T, HV, V];
g (natural-log gate) and beta [B, T, HV]; states fp32 [N, HV, K, V], or [N, HV, V, K] with
state_v_first; cu_seqlens [N+1] (int64 or int32) with B = 1. Returns (o, final_state or None).
The gate and beta options (use_gate_in_kernel with A_log / dt_bias, use_beta_sigmoid_in_kernel,
allow_neg_eigval) are applied with torch elementwise ops before the kernel. Forward only: a call
that would need gradients raises NotImplementedError, as do gk / gv, cp_context, and inputs of
different dtypes. On a GPU, attnkit's kernels take K = V = 128 in bf16 / fp16; other sizes raise
NotImplementedError from the kernel dispatch.
"""

import warnings

import torch
import torch.nn.functional as F

from . import torch_ops as _ops

__all__ = ["chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "chunk_gdn",
           "fused_recurrent_gdn"]


def _state_layout(state_v_first, kwargs):
    if "head_first" in kwargs:
        raise DeprecationWarning("head_first is deprecated and no longer supported: pass "
                                 "[B, T, H, D] tensors")
    transpose = kwargs.pop("transpose_state_layout", None)
    if transpose is not None:
        if state_v_first:
            raise ValueError("pass state_v_first or the deprecated transpose_state_layout, not both")
        warnings.warn("transpose_state_layout is deprecated: use state_v_first",
                      DeprecationWarning, stacklevel=3)
        state_v_first = bool(transpose)
    return state_v_first


def _reject_extra(kwargs, fn):
    if kwargs:
        raise NotImplementedError(f"attnkit.fla.{fn}: {', '.join(sorted(kwargs))} not supported")


def _check_shapes(q, k, v, cu_seqlens, initial_state):
    if q.shape != k.shape:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must have the same shape")
    if v.shape[2] % q.shape[2] != 0:
        raise ValueError(f"value heads ({v.shape[2]}) must be a multiple of q/k heads "
                         f"({q.shape[2]})")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise NotImplementedError(f"attnkit.fla: q, k and v of different dtypes ({q.dtype}, "
                                  f"{k.dtype}, {v.dtype}) are not supported")
    if cu_seqlens is not None:
        if q.shape[0] != 1:
            raise ValueError(f"The batch size is expected to be 1 rather than {q.shape[0]} when "
                             "using `cu_seqlens`")
        n = cu_seqlens.shape[0] - 1
        if initial_state is not None and initial_state.shape[0] != n:
            raise ValueError(f"The number of initial states is expected to be {n} (sequences), "
                             f"got {initial_state.shape[0]}")


def _gates(g, beta, q, v, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel,
           allow_neg_eigval):
    """g as fp32 (fused gate applied), beta as fp32 or q's dtype (sigmoid applied)."""
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError("allow_neg_eigval needs use_beta_sigmoid_in_kernel=True")
    if use_gate_in_kernel:
        if A_log is None or g is None:
            raise ValueError("use_gate_in_kernel needs g (the gate's input) and A_log")
        a = g.float() if dt_bias is None else g.float() + dt_bias.float()
        g = -A_log.float().exp() * F.softplus(a)
    elif g is None:
        g = v.new_zeros(v.shape[:3], dtype=torch.float32)
    else:
        g = g.float()
    if beta is None:
        beta = v.new_ones(v.shape[:3], dtype=torch.float32)
    elif use_beta_sigmoid_in_kernel:
        beta = beta.float().sigmoid()
        if allow_neg_eigval:
            beta = beta * 2
    elif beta.dtype not in (torch.float32, q.dtype):
        beta = beta.float()
    return g.contiguous(), beta.contiguous()


def _initial(initial_state, state_v_first):
    """fp32 initial state as the [N, HV, K, V] view attnkit reads (transposed when key-last)."""
    if initial_state is None:
        return None
    h0 = _ops.last_contiguous(initial_state.to(torch.float32))
    return h0.transpose(-1, -2) if state_v_first else h0


# The custom ops while torch.compile traces, their implementations otherwise.
_chunk = _ops.eager_or_op(_ops.gdn_chunk_forward, _ops.gdn_chunk_forward_impl)
_decode = _ops.eager_or_op(_ops.gdn_decode_step, _ops.gdn_decode_step_impl)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                           output_final_state=False, use_qk_l2norm_in_kernel=False,
                           use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                           state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                           chunk_indices=None, cp_context=None, **kwargs):
    """The chunked Gated DeltaNet forward (attnkit.gdn_chunk_forward). cu_seqlens_cpu and
    chunk_indices are hints and change nothing; chunk_size (16, 32 or 64) only changes rounding in
    fla, and attnkit always uses 64-token chunks."""
    state_v_first = _state_layout(state_v_first, kwargs)
    chunk_size = kwargs.pop("chunk_size", 64)
    if chunk_size not in (16, 32, 64):
        raise ValueError(f"chunk_size must be 16, 32 or 64, got {chunk_size}")
    use_gate = kwargs.pop("use_gate_in_kernel", False)
    A_log, dt_bias = kwargs.pop("A_log", None), kwargs.pop("dt_bias", None)
    _reject_extra(kwargs, "chunk_gated_delta_rule")
    if cp_context is not None:
        raise NotImplementedError("attnkit.fla: cp_context (context parallelism) is not supported")
    if g is None:
        raise ValueError("chunk_gated_delta_rule needs g")
    _ops.require_no_grad(q, k, v, g, beta, initial_state, A_log, dt_bias)
    q, k, v = (_ops.last_contiguous(x) for x in (q, k, v))
    _check_shapes(q, k, v, cu_seqlens, initial_state)
    g, beta = _gates(g, beta, q, v, use_gate, A_log, dt_bias, use_beta_sigmoid_in_kernel,
                     allow_neg_eigval)
    cu = cu_seqlens.to(torch.int32) if cu_seqlens is not None else None
    o, fin = _chunk(q, k, v, g, beta, cu, _initial(initial_state, state_v_first),
                    bool(output_final_state), float(scale or 0.0), bool(use_qk_l2norm_in_kernel),
                    bool(state_v_first))
    return o, (fin if output_final_state else None)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None,
                                     initial_state=None, output_final_state=False,
                                     use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                                     A_log=None, dt_bias=None, use_beta_sigmoid_in_kernel=False,
                                     allow_neg_eigval=False, state_v_first=False,
                                     cu_seqlens=None, **kwargs):
    """The token-by-token Gated DeltaNet recurrence. One token per sequence (T = 1, no cu_seqlens)
    runs attnkit's decode step on a copy of the initial states; longer inputs run the chunked
    forward, which computes the same recurrence. Returns (o in v's dtype, final_state or None)."""
    state_v_first = _state_layout(state_v_first, kwargs)
    _reject_extra(kwargs, "fused_recurrent_gated_delta_rule")
    if gk is not None or gv is not None:
        raise NotImplementedError("attnkit.fla: per-key / per-value decay (gk, gv) is not supported")
    _ops.require_no_grad(q, k, v, g, beta, initial_state, A_log, dt_bias)
    q, k, v = (_ops.last_contiguous(x) for x in (q, k, v))
    _check_shapes(q, k, v, cu_seqlens, initial_state)
    g, beta = _gates(g, beta, q, v, use_gate_in_kernel, A_log, dt_bias,
                     use_beta_sigmoid_in_kernel, allow_neg_eigval)
    if cu_seqlens is not None or q.shape[1] != 1:
        cu = cu_seqlens.to(torch.int32) if cu_seqlens is not None else None
        o, fin = _chunk(q, k, v, g, beta, cu, _initial(initial_state, state_v_first),
                        bool(output_final_state), float(scale or 0.0),
                        bool(use_qk_l2norm_in_kernel), bool(state_v_first))
        return o, (fin if output_final_state else None)

    n, hv, kd, vd = q.shape[0], v.shape[2], q.shape[3], v.shape[3]
    shape = (n, hv, vd, kd) if state_v_first else (n, hv, kd, vd)
    if initial_state is None:
        fin = q.new_zeros(shape, dtype=torch.float32)
    else:
        fin = initial_state.to(torch.float32, copy=True).contiguous()
    pool = fin.transpose(-1, -2) if state_v_first else fin
    slots = torch.arange(n, dtype=torch.int32, device=q.device)
    o = _decode(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], pool, slots, float(scale or 0.0),
                bool(use_qk_l2norm_in_kernel))
    return o.unsqueeze(1), (fin if output_final_state else None)


chunk_gdn = chunk_gated_delta_rule
fused_recurrent_gdn = fused_recurrent_gated_delta_rule
