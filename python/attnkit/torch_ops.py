"""attnkit's ops as torch custom ops (torch.ops.attnkit.*), each with a fake implementation, so that
torch.compile(fullgraph=True) traces models that call them and CUDA graphs capture them.

Every op returns new tensors (or updates the tensor its schema marks as mutated), is enqueued on
torch's current stream, and runs on any device attnkit was built for (CPU tensors: the reference
backend). The drop-in modules (attnkit.flash_attn_interface, attnkit.fla) call the *_impl
functions directly in eager mode, which skips the dispatcher's per-call cost, and the ops while
torch.compile traces.
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _C
from ._arrays import fp8_bytes, torch_exports_fp8
from ._ops import _state_shape

# torch before DLPack's float8 codes: FP8 tensors go to attnkit as uint8 views (read as e4m3).
_FP8_AS_BYTES = not torch_exports_fp8()

_cur_stream = torch._C._cuda_getCurrentRawStream if torch.cuda.is_available() else None


def stream(t: Tensor) -> int:
    """torch's current stream on t's device (0 for host tensors)."""
    return _cur_stream(t.device.index) if t.is_cuda else 0


def _lse_shapes(q: Tensor, lse_heads_first: bool):
    """LSE as allocated ([B, Hq, Sq] / [Hq, total_q] heads first, else q's leading dims) and the
    permutation giving the [B, Sq, Hq] / [total_q, Hq] view attnkit writes through."""
    if not lse_heads_first:
        return tuple(q.shape[:-1]), None
    if q.dim() == 4:
        return (q.shape[0], q.shape[2], q.shape[1]), (0, 2, 1)
    return (q.shape[1], q.shape[0]), (1, 0)


def _out_dtype(q: Tensor) -> torch.dtype:
    return torch.bfloat16 if q.dtype == torch.float8_e4m3fn else q.dtype


def attention_impl(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor],
                   cu_seqlens_k: Optional[Tensor], page_table: Optional[Tensor],
                   seqused_k: Optional[Tensor], alibi_slopes: Optional[Tensor],
                   sinks: Optional[Tensor], q_scale: Optional[Tensor], k_scale: Optional[Tensor],
                   v_scale: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int, scale: float, window_left: int,
                   window_right: int, chunk_size: int, softcap: float, num_splits: int,
                   return_lse: bool, lse_heads_first: bool) -> Tuple[Tensor, Optional[Tensor]]:
    """(out, lse); lse is None unless return_lse (one allocation less per eager decode call).
    out is in q's dtype, bfloat16 for FP8 q (FlashAttention-3's choice)."""
    out = q.new_empty(q.shape[:-1] + (v.shape[-1],), dtype=_out_dtype(q))
    lse = lse_view = None
    if return_lse:
        shape, perm = _lse_shapes(q, lse_heads_first)
        lse = q.new_empty(shape, dtype=torch.float32)
        lse_view = lse.permute(perm) if perm is not None else lse
    if _FP8_AS_BYTES:
        q, k, v = fp8_bytes(q), fp8_bytes(k), fp8_bytes(v)
    _C.attention_forward(q, k, v, out, lse_view, cu_seqlens_q, cu_seqlens_k, page_table, seqused_k,
                         alibi_slopes, sinks, q_scale, k_scale, v_scale, max_seqlen_q,
                         max_seqlen_k, scale, window_left, window_right, chunk_size, softcap,
                         num_splits, "auto",
                         stream(q), False, 0, None)
    return out, lse


@torch.library.custom_op("attnkit::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor],
              cu_seqlens_k: Optional[Tensor], page_table: Optional[Tensor],
              seqused_k: Optional[Tensor], alibi_slopes: Optional[Tensor], sinks: Optional[Tensor],
              q_scale: Optional[Tensor], k_scale: Optional[Tensor], v_scale: Optional[Tensor],
              max_seqlen_q: int,
              max_seqlen_k: int, scale: float, window_left: int, window_right: int,
              chunk_size: int, softcap: float, num_splits: int, return_lse: bool,
              lse_heads_first: bool) -> Tuple[Tensor, Tensor]:
    """attnkit.attention as a torch op: returns (out, lse); lse is empty unless return_lse."""
    out, lse = attention_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, page_table, seqused_k,
                              alibi_slopes, sinks, q_scale, k_scale, v_scale, max_seqlen_q,
                              max_seqlen_k, scale, window_left, window_right, chunk_size, softcap,
                              num_splits, return_lse, lse_heads_first)
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


@attention.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, page_table, seqused_k, alibi_slopes, sinks, q_scale,
      k_scale, v_scale, max_seqlen_q, max_seqlen_k, scale, window_left, window_right, chunk_size,
      softcap, num_splits, return_lse, lse_heads_first):
    out = q.new_empty(q.shape[:-1] + (v.shape[-1],), dtype=_out_dtype(q))
    shape = _lse_shapes(q, lse_heads_first)[0] if return_lse else (0,)
    return out, q.new_empty(shape, dtype=torch.float32)


def append_kv_cache_impl(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor,
                         slot_mapping: Tensor, k_scale: Optional[Tensor],
                         v_scale: Optional[Tensor]) -> None:
    _C.append_kv_cache(k, v, fp8_bytes(k_cache), fp8_bytes(v_cache), slot_mapping, k_scale,
                       v_scale, "auto", stream(k), False)


@torch.library.custom_op("attnkit::append_kv_cache",
                         mutates_args=("k_cache", "v_cache", "k_scale", "v_scale"))
def append_kv_cache(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, slot_mapping: Tensor,
                    k_scale: Optional[Tensor], v_scale: Optional[Tensor]) -> None:
    """attnkit.append_kv_cache as a torch op: writes k_cache / v_cache (and per-token scales) in
    place."""
    append_kv_cache_impl(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale)


@append_kv_cache.register_fake
def _(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale):
    return None


def merge_states_impl(o_parts: Tensor, lse_parts: Tensor) -> Tuple[Tensor, Tensor]:
    out = o_parts.new_empty(o_parts.shape[1:])
    lse = o_parts.new_empty(o_parts.shape[1:-1], dtype=torch.float32)
    _C.merge_states(o_parts, lse_parts, out, lse, "auto", stream(o_parts), 0)
    return out, lse


@torch.library.custom_op("attnkit::merge_states", mutates_args=())
def merge_states(o_parts: Tensor, lse_parts: Tensor) -> Tuple[Tensor, Tensor]:
    """attnkit.merge_states as a torch op: (out [T, H, D] in o_parts' dtype, lse [T, H])."""
    return merge_states_impl(o_parts, lse_parts)


@merge_states.register_fake
def _(o_parts, lse_parts):
    return (o_parts.new_empty(o_parts.shape[1:]),
            o_parts.new_empty(o_parts.shape[1:-1], dtype=torch.float32))


def gdn_chunk_forward_impl(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                           cu_seqlens: Optional[Tensor], initial_state: Optional[Tensor],
                           output_final_state: bool, scale: float, use_qk_l2norm: bool,
                           state_key_last: bool) -> Tuple[Tensor, Tensor]:
    """final_state is [N, HV, V, K] when state_key_last (written through its transposed view), else
    [N, HV, K, V]; empty without output_final_state."""
    out = q.new_empty(v.shape)
    fin_view = None
    if output_final_state:
        n, hv, kd, vd = _state_shape(q, v, cu_seqlens)
        if state_key_last:
            fin = q.new_empty((n, hv, vd, kd), dtype=torch.float32)
            fin_view = fin.transpose(-1, -2)
        else:
            fin = fin_view = q.new_empty((n, hv, kd, vd), dtype=torch.float32)
    else:
        fin = q.new_empty((0,), dtype=torch.float32)
    _C.gdn_chunk_forward(q, k, v, g, beta, cu_seqlens, initial_state, fin_view, out, scale,
                         use_qk_l2norm, "auto", stream(q), False, 0)
    return out, fin


@torch.library.custom_op("attnkit::gdn_chunk_forward", mutates_args=())
def gdn_chunk_forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                      cu_seqlens: Optional[Tensor], initial_state: Optional[Tensor],
                      output_final_state: bool, scale: float, use_qk_l2norm: bool,
                      state_key_last: bool) -> Tuple[Tensor, Tensor]:
    """attnkit.gdn_chunk_forward as a torch op: (o, final_state or an empty tensor).
    initial_state may be [N, HV, K, V] or, transposed, key-last [N, HV, V, K]."""
    return gdn_chunk_forward_impl(q, k, v, g, beta, cu_seqlens, initial_state, output_final_state,
                                  scale, use_qk_l2norm, state_key_last)


@gdn_chunk_forward.register_fake
def _(q, k, v, g, beta, cu_seqlens, initial_state, output_final_state, scale, use_qk_l2norm,
      state_key_last):
    if output_final_state:
        n, hv, kd, vd = _state_shape(q, v, cu_seqlens)
        shape = (n, hv, vd, kd) if state_key_last else (n, hv, kd, vd)
    else:
        shape = (0,)
    return q.new_empty(v.shape), q.new_empty(shape, dtype=torch.float32)


def gdn_decode_step_impl(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                         state_pool: Tensor, state_indices: Tensor, scale: float,
                         use_qk_l2norm: bool) -> Tensor:
    out = q.new_empty(v.shape)
    _C.gdn_decode_step(q, k, v, g, beta, state_pool, state_indices, out, scale, use_qk_l2norm,
                       "auto", stream(q), False, 0)
    return out


@torch.library.custom_op("attnkit::gdn_decode_step", mutates_args=("state_pool",))
def gdn_decode_step(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state_pool: Tensor,
                    state_indices: Tensor, scale: float, use_qk_l2norm: bool) -> Tensor:
    """attnkit.gdn_decode_step as a torch op: returns o; updates state_pool (fp32 [P, HV, K, V],
    or the key-last pool transposed) in place."""
    return gdn_decode_step_impl(q, k, v, g, beta, state_pool, state_indices, scale, use_qk_l2norm)


@gdn_decode_step.register_fake
def _(q, k, v, g, beta, state_pool, state_indices, scale, use_qk_l2norm):
    return q.new_empty(v.shape)


# ---- The chunked pipeline's stages (q / k already normalised). `dtype`: the intermediates'
# dtype, torch.float32 or torch.bfloat16.

def _exec(t: Tensor):
    return "auto", stream(t), False, 0


@torch.library.custom_op("attnkit::gdn_chunk_cumsum", mutates_args=())
def gdn_chunk_cumsum(g: Tensor, cu_seqlens: Optional[Tensor]) -> Tensor:
    """1. g_cum [B, T, HV] fp32, the chunk-local cumulative sum of g."""
    out = g.new_empty(g.shape, dtype=torch.float32)
    _C.gdn_chunk_cumsum(g, cu_seqlens, out, *_exec(g))
    return out


@gdn_chunk_cumsum.register_fake
def _(g, cu_seqlens):
    return g.new_empty(g.shape, dtype=torch.float32)


@torch.library.custom_op("attnkit::gdn_kkt_inverse", mutates_args=())
def gdn_kkt_inverse(k: Tensor, beta: Tensor, g_cum: Tensor, cu_seqlens: Optional[Tensor],
                    dtype: torch.dtype) -> Tensor:
    """2. a_inv [B, T, HV, 64]."""
    out = k.new_empty(g_cum.shape + (64,), dtype=dtype)
    _C.gdn_kkt_inverse(k, beta, g_cum, cu_seqlens, out, *_exec(k))
    return out


@gdn_kkt_inverse.register_fake
def _(k, beta, g_cum, cu_seqlens, dtype):
    return k.new_empty(g_cum.shape + (64,), dtype=dtype)


@torch.library.custom_op("attnkit::gdn_wu", mutates_args=())
def gdn_wu(k: Tensor, v: Tensor, beta: Tensor, g_cum: Tensor, a_inv: Tensor,
           cu_seqlens: Optional[Tensor], dtype: torch.dtype) -> Tuple[Tensor, Tensor]:
    """3. (w [B, T, HV, K], u [B, T, HV, V])."""
    w = k.new_empty(v.shape[:3] + (k.shape[3],), dtype=dtype)
    u = k.new_empty(v.shape, dtype=dtype)
    _C.gdn_wu(k, v, beta, g_cum, a_inv, cu_seqlens, w, u, *_exec(k))
    return w, u


@gdn_wu.register_fake
def _(k, v, beta, g_cum, a_inv, cu_seqlens, dtype):
    return k.new_empty(v.shape[:3] + (k.shape[3],), dtype=dtype), k.new_empty(v.shape, dtype=dtype)


@torch.library.custom_op("attnkit::gdn_state_pass", mutates_args=())
def gdn_state_pass(k: Tensor, w: Tensor, u: Tensor, g_cum: Tensor, cu_seqlens: Optional[Tensor],
                   initial_state: Optional[Tensor], num_chunks: int, output_final_state: bool,
                   dtype: torch.dtype) -> Tuple[Tensor, Tensor, Tensor]:
    """4. (h [num_chunks, HV, K, V], v_new [B, T, HV, V], final_state or an empty tensor);
    num_chunks from attnkit.gdn_num_chunks."""
    h = k.new_empty((num_chunks, u.shape[2], k.shape[3], u.shape[3]), dtype=dtype)
    v_new = k.new_empty(u.shape, dtype=dtype)
    fin = k.new_empty(_state_shape(k, u, cu_seqlens) if output_final_state else (0,),
                      dtype=torch.float32)
    _C.gdn_state_pass(k, w, u, g_cum, cu_seqlens, initial_state, h, v_new,
                      fin if output_final_state else None, *_exec(k))
    return h, v_new, fin


@gdn_state_pass.register_fake
def _(k, w, u, g_cum, cu_seqlens, initial_state, num_chunks, output_final_state, dtype):
    return (k.new_empty((num_chunks, u.shape[2], k.shape[3], u.shape[3]), dtype=dtype),
            k.new_empty(u.shape, dtype=dtype),
            k.new_empty(_state_shape(k, u, cu_seqlens) if output_final_state else (0,),
                        dtype=torch.float32))


@torch.library.custom_op("attnkit::gdn_chunk_output", mutates_args=())
def gdn_chunk_output(q: Tensor, k: Tensor, v_new: Tensor, h: Tensor, g_cum: Tensor,
                     cu_seqlens: Optional[Tensor], scale: float) -> Tensor:
    """5. o [B, T, HV, V] in q's dtype."""
    out = q.new_empty(v_new.shape, dtype=q.dtype)
    _C.gdn_chunk_output(q, k, v_new, h, g_cum, cu_seqlens, out, scale, *_exec(q))
    return out


@gdn_chunk_output.register_fake
def _(q, k, v_new, h, g_cum, cu_seqlens, scale):
    return q.new_empty(v_new.shape, dtype=q.dtype)


# ---- For the drop-in modules

def eager_or_op(op, impl):
    """A function that calls the custom op `op` while torch.compile traces and its implementation
    `impl` otherwise (no dispatcher cost per eager call)."""
    def call(*args):
        if torch.compiler.is_compiling():
            return op(*args)
        return impl(*args)

    return call


def last_contiguous(x: Tensor) -> Tensor:
    """x, or a copy of it when its last dimension is not contiguous (what the kernels read)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def require_no_grad(*tensors) -> None:
    """NotImplementedError when autograd would need a backward pass through attnkit."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise NotImplementedError("attnkit has no backward pass: call it under torch.no_grad() "
                                  "or torch.inference_mode(), or detach the inputs")


def ops() -> List[object]:
    """The custom ops this module registers (for torch.library.opcheck)."""
    return [attention, merge_states, append_kv_cache, gdn_chunk_forward, gdn_decode_step,
            gdn_chunk_cumsum, gdn_kkt_inverse, gdn_wu, gdn_state_pass, gdn_chunk_output]
