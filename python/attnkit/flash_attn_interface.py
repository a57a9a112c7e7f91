"""FlashAttention-3's Python interface (hopper/flash_attn_interface.py) on attnkit's kernels:
change `from flash_attn_interface import ...` to `from attnkit.flash_attn_interface import ...`.

The functions keep FlashAttention-3's argument names, order, defaults and return values: outputs
in q's dtype, LSE fp32 [B, H, Sq] (batched) or [H, total_q] (varlen), masks aligned bottom-right.
Learned sinks are taken the way vLLM passes them, as a trailing `s_aux` ([H], one logit per query
head). Forward only: a call that would need gradients raises NotImplementedError.

Arguments that change nothing but speed are accepted: pack_gqa (attnkit packs the GQA group by
itself), deterministic (the forward is deterministic), scheduler_metadata (attnkit plans on the
host; get_scheduler_metadata returns an empty tensor). An argument attnkit does not support
raises NotImplementedError naming it: qv, seqused_q, rotary embedding, cache_leftpad, sm_margin.

FP8 (float8_e4m3fn) inputs take FlashAttention-3's q_descale / k_descale / v_descale ([B, Hk]
fp32, 1 when not given) and return bfloat16. Where attnkit has no kernel for an FP8 call yet (today:
FP8 queries and [B, Hk] descales on a CUDA device) the call raises NotImplementedError saying so;
an FP8 KV cache under fp16 / bf16 queries runs the decode kernel.

flash_attn_with_kvcache appends k / v (new tokens) to the cache with torch indexing ops before the
attention kernel runs (attnkit has no fused append yet); positions past the cache's capacity are
clamped, so nothing is written out of bounds.
"""

import torch

from . import torch_ops as _ops

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache",
           "flash_attn_combine", "get_scheduler_metadata"]


def _raise_unsupported(**given):
    for name, value in given.items():
        if value is not None and value is not False and not (isinstance(value, (int, float)) and value == 0):
            raise NotImplementedError(f"attnkit.flash_attn_interface: {name} is not supported")


_HALF = (torch.float16, torch.bfloat16)


def _check(q, k, v):
    if q.dtype not in _HALF or k.dtype not in _HALF or v.dtype not in _HALF:
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.dtype.itemsize == 1 and t.dtype != torch.float8_e4m3fn:
                raise NotImplementedError(f"attnkit.flash_attn_interface: {name} is {t.dtype}; "
                                          "FP8 inputs must be float8_e4m3fn")
    if torch.is_grad_enabled():
        _ops.require_no_grad(q, k, v)


_ONE = {}


def _descale(t, descale, cu_seqlens=None):
    """The fp32 scale attnkit reads for tensor t: None unless t is FP8 (FlashAttention-3 reads
    descales only then); FlashAttention-3's [B, Hk] descale, or 1 when not given. A ragged t whose
    per-token scale shape is also [B, Hk] gets the descale expanded per token, which reads the
    same."""
    if t.dtype != torch.float8_e4m3fn:
        return None
    if descale is None:
        one = _ONE.get(t.device)
        if one is None:
            one = _ONE[t.device] = torch.ones(1, dtype=torch.float32, device=t.device)
        return one
    descale = descale.to(torch.float32).contiguous()
    if cu_seqlens is not None and t.dim() == 3 and descale.shape == t.shape[:2]:
        seq = torch.repeat_interleave(torch.arange(cu_seqlens.shape[0] - 1, device=t.device),
                                      (cu_seqlens[1:] - cu_seqlens[:-1]).to(torch.int64))
        group = t.shape[1] // descale.shape[1]
        descale = descale[seq][:, torch.arange(t.shape[1], device=t.device) // group].contiguous()
    return descale


def _int32(t):
    return t if t.dtype == torch.int32 else t.to(torch.int32)


def _window(window_size, causal):
    left, right = window_size
    return int(left), 0 if causal else int(right)


def _scale(softmax_scale, q):
    return float(softmax_scale) if softmax_scale is not None else q.shape[-1] ** -0.5


def _sinks(s_aux):
    return None if s_aux is None else s_aux.to(torch.float32).contiguous()


# torch.ops.attnkit.attention while torch.compile traces, its implementation otherwise.
_attention = _ops.eager_or_op(_ops.attention, _ops.attention_impl)
_merge_states = _ops.eager_or_op(_ops.merge_states, _ops.merge_states_impl)


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None,
                    k_descale=None, v_descale=None, window_size=(-1, -1), attention_chunk=0,
                    softcap=0.0, num_splits=1, pack_gqa=None, deterministic=False, sm_margin=0,
                    return_attn_probs=False, s_aux=None):
    """Attention over batched q [B, Sq, H, D], k / v [B, Sk, Hk, D]. Returns out [B, Sq, H, Dv],
    or (out, softmax_lse [B, H, Sq]) with return_attn_probs."""
    _raise_unsupported(qv=qv, sm_margin=sm_margin)
    q, k, v = (_ops.last_contiguous(x) for x in (q, k, v))
    _check(q, k, v)
    left, right = _window(window_size, causal)
    out, lse = _attention(q, k, v, None, None, None, None, None, _sinks(s_aux),
                          _descale(q, q_descale), _descale(k, k_descale), _descale(v, v_descale),
                          0, 0, _scale(softmax_scale, q), left, right, int(attention_chunk),
                          float(softcap), int(num_splits), bool(return_attn_probs), True)
    return (out, lse) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           seqused_q=None, seqused_k=None, softmax_scale=None, causal=False,
                           qv=None, q_descale=None, k_descale=None, v_descale=None,
                           window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0,
                           return_attn_probs=False, s_aux=None):
    """Attention over packed sequences: q [total_q, H, D] with cu_seqlens_q [B+1] (int32), k / v
    [total_k, Hk, D] with cu_seqlens_k (or batched [B, Sk, Hk, D] with seqused_k when cu_seqlens_k
    is None). Returns out [total_q, H, Dv], or (out, softmax_lse [H, total_q])."""
    _raise_unsupported(qv=qv, seqused_q=seqused_q, sm_margin=sm_margin)
    if cu_seqlens_q is None:
        raise NotImplementedError("attnkit.flash_attn_interface: flash_attn_varlen_func needs "
                                  "cu_seqlens_q")
    if cu_seqlens_k is not None and seqused_k is not None:
        raise NotImplementedError("attnkit.flash_attn_interface: seqused_k together with "
                                  "cu_seqlens_k is not supported")
    q, k, v = (_ops.last_contiguous(x) for x in (q, k, v))
    _check(q, k, v)
    left, right = _window(window_size, causal)
    out, lse = _attention(q, k, v, cu_seqlens_q, cu_seqlens_k, None, seqused_k, None,
                          _sinks(s_aux), _descale(q, q_descale, cu_seqlens_q),
                          _descale(k, k_descale, cu_seqlens_k), _descale(v, v_descale, cu_seqlens_k),
                          int(max_seqlen_q), int(max_seqlen_k),
                          _scale(softmax_scale, q), left, right, int(attention_chunk),
                          float(softcap), int(num_splits), bool(return_attn_probs), True)
    return (out, lse) if return_attn_probs else out


def _append_kv(k_cache, v_cache, k, v, cache_seqlens, page_table, cache_batch_idx,
               cu_seqlens_k_new):
    """Writes the new tokens k / v at positions cache_seqlens[b] + j of each sequence's cache row
    (through page_table when paged), clamped to the cache's capacity."""
    dev = k.device
    if cu_seqlens_k_new is None:
        batch, s_new = k.shape[0], k.shape[1]
        seq = torch.arange(batch, device=dev).repeat_interleave(s_new)
        offset = torch.arange(s_new, device=dev).repeat(batch)
        k, v = k.reshape(batch * s_new, *k.shape[2:]), v.reshape(batch * s_new, *v.shape[2:])
    else:
        tok = torch.arange(k.shape[0], device=dev)
        cu = cu_seqlens_k_new.to(torch.int64)
        seq = torch.searchsorted(cu[1:], tok, right=True).clamp_(max=cu.shape[0] - 2)
        offset = tok - cu[seq]
    pos = cache_seqlens.to(torch.int64)[seq] + offset
    row = seq if cache_batch_idx is None else cache_batch_idx.to(torch.int64)[seq]
    if page_table is None:
        pos = pos.clamp(0, k_cache.shape[1] - 1)
        k_cache[row, pos] = k
        v_cache[row, pos] = v
    else:
        page_size = k_cache.shape[1]
        pos = pos.clamp(0, page_table.shape[1] * page_size - 1)
        page = page_table.to(torch.int64)[row, pos // page_size]
        k_cache[page, pos % page_size] = k
        v_cache[page, pos % page_size] = v


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                            rotary_interleaved=True, scheduler_metadata=None, num_splits=0,
                            pack_gqa=None, sm_margin=0, return_softmax_lse=False, s_aux=None):
    """Decode / chunked prefill against a KV cache: q [B, Sq, H, D] (or [total_q, H, D] with
    cu_seqlens_q and max_seqlen_q); k_cache / v_cache [B_cache, Sk, Hk, D] or paged
    [num_pages, page_size, Hk, D] with page_table [B, max_pages]; cache_seqlens (int or int32 [B]):
    the tokens in each cache before k / v (new tokens, optional) are appended in place.
    Returns out, or (out, softmax_lse, out_accum, softmax_lse_accum) with return_softmax_lse
    (the last two are empty: attnkit merges split-KV partials inside its kernels)."""
    if (qv is not None or rotary_cos is not None or rotary_sin is not None
            or cache_leftpad is not None or rotary_seqlens is not None or sm_margin):
        _raise_unsupported(qv=qv, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                           cache_leftpad=cache_leftpad, rotary_seqlens=rotary_seqlens,
                           sm_margin=sm_margin)
    # Each torch attribute read costs ~0.1-0.2 µs of a decode call's host time: read each once.
    # attention_forward itself refuses caches whose last dimension is not contiguous.
    q = _ops.last_contiguous(q)
    _check(q, k_cache, v_cache)
    if (k is None) != (v is None):
        raise ValueError("k and v (new tokens) must be given together")
    varlen_q = cu_seqlens_q is not None
    if varlen_q and max_seqlen_q is None:
        raise ValueError("max_seqlen_q is required with cu_seqlens_q")
    batch = cu_seqlens_q.shape[0] - 1 if varlen_q else q.shape[0]

    paged = page_table is not None
    rows = k_cache.shape[1]
    capacity = page_table.shape[1] * rows if paged else rows
    if cache_seqlens is None:
        cache_seqlens = torch.full((batch,), capacity if k is None else 0, dtype=torch.int32,
                                   device=q.device)
    elif isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=q.device)
    if k is not None:
        if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:  # refused before anything is written
            raise ValueError("k_cache and v_cache must have a contiguous last dimension")
        if k.dtype != k_cache.dtype or v.dtype != v_cache.dtype:  # a cast would drop the scales
            raise ValueError(f"k / v ({k.dtype}) must have the caches' dtype ({k_cache.dtype}); "
                             "quantise new tokens into an FP8 cache with attnkit.append_kv_cache")
        _append_kv(k_cache, v_cache, k, v, cache_seqlens, page_table, cache_batch_idx,
                   cu_seqlens_k_new)
        if cu_seqlens_k_new is None:
            new = k.shape[1]
        else:
            new = (cu_seqlens_k_new[1:] - cu_seqlens_k_new[:-1])
        seqused_k = _int32(cache_seqlens + new)
    else:
        seqused_k = _int32(cache_seqlens)

    if cache_batch_idx is not None:
        idx = cache_batch_idx.to(torch.int64)
        if paged:
            page_table = page_table[idx]
        else:  # a contiguous cache is a paged one with one page of Sk rows per sequence
            page_table = idx.to(torch.int32).unsqueeze(1)
    elif not paged and k_cache.shape[0] != batch:
        k_cache, v_cache = k_cache[:batch], v_cache[:batch]
    if page_table is not None:
        page_table = _int32(page_table)
        if not paged:
            page_table = page_table.contiguous()

    left, right = _window(window_size, causal)
    out, lse = _attention(q, k_cache, v_cache, cu_seqlens_q, None, page_table, seqused_k, None,
                          _sinks(s_aux), _descale(q, q_descale, cu_seqlens_q),
                          _descale(k_cache, k_descale), _descale(v_cache, v_descale),
                          int(max_seqlen_q or 0), int(capacity),
                          _scale(softmax_scale, q), left, right, int(attention_chunk),
                          float(softcap), int(num_splits), bool(return_softmax_lse), True)
    if not return_softmax_lse:
        return out
    empty = torch.empty(0, dtype=torch.float32, device=q.device)
    return out, lse, empty, empty


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None):
    """Merges split-KV partial results (attnkit.merge_states): out_partial [S, B, Sq, H, D] (or
    [S, total_q, H, D]) fp32, lse_partial [S, B, Sq, H]. Returns (out [B, Sq, H, D] in out_dtype,
    default fp32, lse [B, Sq, H] fp32)."""
    splits, lead, d = out_partial.shape[0], out_partial.shape[1:-2], out_partial.shape[-1]
    heads = out_partial.shape[-2]
    o_parts = _ops.last_contiguous(out_partial.reshape(splits, -1, heads, d))
    lse_parts = lse_partial.reshape(splits, -1, heads).to(torch.float32)
    merged, lse = _merge_states(o_parts, lse_parts)
    merged = merged.to(out_dtype or torch.float32).view(*lead, heads, d)
    if out is not None:
        out.copy_(merged)
        merged = out
    return merged, lse.view(*lead, heads)


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads_q, num_heads_kv,
                           headdim, cache_seqlens, qkv_dtype=torch.bfloat16, headdim_v=None,
                           cu_seqlens_q=None, cu_seqlens_k_new=None, cache_leftpad=None,
                           page_size=None, max_seqlen_k_new=0, causal=False,
                           window_size=(-1, -1), attention_chunk=0, has_softcap=False,
                           num_splits=0, pack_gqa=None, sm_margin=0):
    """attnkit plans on the host inside each call, so there is no scheduler state to precompute:
    returns an empty int32 tensor, which flash_attn_with_kvcache accepts as scheduler_metadata."""
    return torch.empty(0, dtype=torch.int32, device=cache_seqlens.device)
