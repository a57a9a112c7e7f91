"""attnkit's ops on any DLPack array (torch, numpy, CuPy, JAX inputs): host arrays run on the CPU
reference backend, CUDA arrays on the CUDA kernels, enqueued on the caller's stream (see
_arrays.stream_of). Outputs can be passed in; otherwise they are allocated like the first input.
The exact semantics of every op are those of the C++ API (include/attnkit/attention.h, gdn.h).

Common keyword arguments:
  backend           'auto' (default), 'cpu', 'cuda-portable' or 'cuda-sm90'
  stream            a cudaStream_t as an int, a torch.cuda.Stream or a cupy Stream
  validate_indices  copy index tensors on a CUDA device back and check them (synchronises)
  cpu_threads       CPU backend threads (0 = all cores)
"""

from . import _C
from ._arrays import empty, fp8_bytes, is_fp8, stream_of

Plan = _C.Plan


def _arrays(**named):
    """ValueError naming the first argument that is not an array (before its shape is read)."""
    for name, x in named.items():
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise ValueError(f"{name}: expected an array (DLPack or buffer protocol), got "
                             f"{type(x).__name__}")


def _mask(causal, window):
    left, right = (int(w) for w in window)
    if causal:
        right = 0
    return left, right


def _attention_call(q, k, v, out, lse, return_lse, causal, window, chunk_size, scale, softcap,
                    alibi_slopes, sinks, q_scale, k_scale, v_scale, cu_seqlens_q, cu_seqlens_k,
                    page_table, seqused_k, max_seqlen_q, max_seqlen_k, num_splits, out_dtype,
                    backend, stream, validate_indices, cpu_threads):
    """The extension's positional arguments for one attention call, outputs allocated where not
    given (lse only with return_lse; out in out_dtype, default q's dtype, bfloat16 for FP8 q)."""
    if out is None or (return_lse and lse is None):  # shapes are read only to allocate
        _arrays(q=q, v=v)
        if out is None:
            if out_dtype is None and is_fp8(q):
                out_dtype = "bfloat16"
            out = empty(q, tuple(q.shape[:-1]) + (v.shape[-1],), out_dtype)
        if return_lse and lse is None:
            lse = empty(q, tuple(q.shape[:-1]), "float32")
    left, right = _mask(causal, window)
    q, k, v = fp8_bytes(q), fp8_bytes(k), fp8_bytes(v)
    return (q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, page_table, seqused_k, alibi_slopes,
            sinks, q_scale, k_scale, v_scale, int(max_seqlen_q), int(max_seqlen_k),
            float(scale or 0.0),
            left, right, int(chunk_size), float(softcap), int(num_splits), backend,
            stream_of(q, stream), bool(validate_indices), int(cpu_threads))


def attention(q, k, v, *, causal=False, window=(-1, -1), chunk_size=0, scale=None, softcap=0.0,
              alibi_slopes=None, sinks=None, q_scale=None, k_scale=None, v_scale=None,
              cu_seqlens_q=None, cu_seqlens_k=None, page_table=None, seqused_k=None,
              max_seqlen_q=0, max_seqlen_k=0, num_splits=0, return_lse=False, out=None, lse=None,
              out_dtype=None, plan=None, backend="auto", stream=None, validate_indices=False,
              cpu_threads=0):
    """Softmax attention, prefill or decode (attnkit::attention_forward).

    q [B, Sq, Hq, D] or ragged [total_q, Hq, D] with cu_seqlens_q [B+1] (int32); k, v contiguous
    [B, Sk, Hkv, D], ragged [total_k, Hkv, D] with cu_seqlens_k, or a paged cache
    [num_pages, page_size, Hkv, D] with page_table [B, max_pages] and seqused_k [B] (int32).
    Masks align the diagonal bottom-right: causal, window=(left, right) (-1 = unbounded; causal sets
    right = 0), chunk_size (same block of positions). scale: default D**-0.5. softcap > 0:
    s <- cap tanh(s / cap). alibi_slopes, sinks: fp32 [Hq]. num_splits: 0 = the library decides.
    q_scale, k_scale, v_scale: with FP8 inputs (float8_e4m3fn; each scale given exactly with its
    FP8 tensor) the queries, keys and values are q_scale * q, k_scale * k and v_scale * v, each
    scale fp32 [1], per head [H], per token (the tensor's shape without its last dimension), or
    per (sequence, KV head) [B, Hkv] (FlashAttention-3's descales); quantize_fp8 and
    append_kv_cache write them. FP8 q needs an fp16 / bf16 out (out_dtype, default bfloat16).
    out_dtype: the output's dtype when out is not given (default q's); 'float32' under fp16 / bf16
    q keeps partial outputs exact for merge_states (CPU backend for now).
    CUDA: an FP8 KV cache with fp16 / bf16 q at decode shapes (the decode kernel), scales per
    tensor, head or token; the rest runs on the CPU backend for now.
    max_seqlen_q / max_seqlen_k: bounds needed when ragged or paged indices live on a CUDA device.
    plan: from plan_attention() for the same shapes and options (skips planning).

    Returns out ([..., Dv], q's dtype), or (out, lse) with return_lse (fp32 [B, Sq, Hq] or
    [total_q, Hq], natural log; -inf for a row that sees no key).
    """
    args = _attention_call(q, k, v, out, lse, return_lse, causal, window, chunk_size, scale,
                           softcap, alibi_slopes, sinks, q_scale, k_scale, v_scale, cu_seqlens_q,
                           cu_seqlens_k, page_table, seqused_k, max_seqlen_q, max_seqlen_k,
                           num_splits, out_dtype, backend, stream, validate_indices, cpu_threads)
    _C.attention_forward(*args, plan)
    out, lse = args[3], args[4]
    return (out, lse) if return_lse else out


def plan_attention(q, k, v, *, causal=False, window=(-1, -1), chunk_size=0, scale=None,
                   softcap=0.0, alibi_slopes=None, sinks=None, q_scale=None, k_scale=None,
                   v_scale=None, cu_seqlens_q=None, cu_seqlens_k=None, page_table=None,
                   seqused_k=None, max_seqlen_q=0, max_seqlen_k=0, num_splits=0, return_lse=False,
                   out=None, lse=None, out_dtype=None, backend="auto", stream=None,
                   validate_indices=False, cpu_threads=0):
    """The Plan attention() would make for these arguments (the kernel chosen, split count and
    workspace), computed once on the host. Pass it as attention(..., plan=) for calls with the same
    shapes and options, across layers and steps, also under CUDA graph capture."""
    return _C.plan_attention(*_attention_call(
        q, k, v, out, lse, return_lse, causal, window, chunk_size, scale, softcap, alibi_slopes,
        sinks, q_scale, k_scale, v_scale, cu_seqlens_q, cu_seqlens_k, page_table, seqused_k,
        max_seqlen_q, max_seqlen_k, num_splits, out_dtype, backend, stream, validate_indices,
        cpu_threads))


def merge_states(o_parts, lse_parts, *, out=None, lse=None, out_dtype=None, backend="auto",
                 stream=None, cpu_threads=0):
    """Merges N partial attention states over the same queries (attnkit::merge_states):
    LSE = log(sum_n exp(LSE_n)), O = sum_n exp(LSE_n - LSE) O_n.

    o_parts [N, T, H, D] (fp32 / fp16 / bf16), lse_parts [N, T, H] fp32. Returns (out [T, H, D] in
    out_dtype (default o_parts' dtype), lse [T, H] fp32)."""
    _arrays(o_parts=o_parts, lse_parts=lse_parts)
    if out is None:
        out = empty(o_parts, tuple(o_parts.shape[1:]), out_dtype)
    if lse is None:
        lse = empty(o_parts, tuple(o_parts.shape[1:-1]), "float32")
    _C.merge_states(o_parts, lse_parts, out, lse, backend, stream_of(o_parts, stream),
                    int(cpu_threads))
    return out, lse


def append_kv_cache(k, v, k_cache, v_cache, slot_mapping, *, k_scale=None, v_scale=None,
                    backend="auto", stream=None, validate_indices=False):
    """Writes new tokens into a paged KV cache in place (attnkit::append_kv_cache, engines'
    reshape_and_cache): for each token t with slot s = slot_mapping[t] != -1,
    k_cache[s // page_size, s % page_size] = k[t] (and v likewise).

    k [T, Hkv, Dk], v [T, Hkv, Dv] (fp16 / bf16); slot_mapping int32 [T]; caches
    [num_pages, page_size, Hkv, D] (any strides, last dimension contiguous: pass vLLM's HND
    [num_pages, Hkv, page_size, D] as .transpose(1, 2)) of k's dtype, or float8_e4m3fn. An FP8
    cache stores e4m3(x / scale) with fp32 scales per tensor [1], per KV head [Hkv], or per
    (token, KV head) [num_pages, page_size, Hkv] (those are written: max |x| / 448 per row).
    v = v_cache = None writes K alone (an MLA latent cache [num_pages, page_size, 1, 576], read as
    both K and V). Returns None."""
    _arrays(k=k, k_cache=k_cache, slot_mapping=slot_mapping,
            **{n: x for n, x in (("v", v), ("v_cache", v_cache)) if x is not None})
    _C.append_kv_cache(k, v, fp8_bytes(k_cache), fp8_bytes(v_cache), slot_mapping, k_scale,
                       v_scale, backend, stream_of(k, stream), bool(validate_indices))


_SCALE_SHAPES = {"tensor": lambda x: (1,), "head": lambda x: (x.shape[-2],),
                 "token": lambda x: tuple(x.shape[:-1])}


def quantize_fp8(x, *, granularity="token", out=None, scale=None, backend="auto", stream=None):
    """x [..., H, D] (fp32 / fp16 / bf16) to e4m3 (attnkit::quantize_fp8): out = e4m3(x / scale),
    scale = max |x| / 448 over each group, so that scale * out approximates x. granularity picks the
    groups and scale's shape, as attention() reads them: 'tensor' [1], 'head' [H], 'token' (x's shape
    without its last dimension). Returns (out float8_e4m3fn, scale fp32); out and scale may be
    passed in (then granularity is read from scale's shape). CPU backend only for now."""
    _arrays(x=x)
    if scale is None:
        if granularity not in _SCALE_SHAPES:
            raise ValueError(f"granularity '{granularity}' is not one of {tuple(_SCALE_SHAPES)}")
        scale = empty(x, _SCALE_SHAPES[granularity](x), "float32")
    if out is None:
        out = empty(x, tuple(x.shape), "float8_e4m3fn")
    _C.quantize_fp8(x, fp8_bytes(out), scale, backend, stream_of(x, stream))
    return out, scale


# ---- Gated DeltaNet

def _state_shape(q, v, cu_seqlens):
    n = (cu_seqlens.shape[0] - 1) if cu_seqlens is not None else q.shape[0]
    return (n, v.shape[2], q.shape[3], v.shape[3])


def _gdn_outputs(q, k, v, cu_seqlens, out, output_final_state, final_state, state_indices=None,
                 initial_state=None):
    """(out, final_state), allocated where not given (final_state only if asked for; with
    state_indices the pool initial_state itself, updated in place)."""
    _arrays(q=q, k=k, v=v)
    if out is None:
        out = empty(q, tuple(v.shape))
    if output_final_state and final_state is None:
        if state_indices is not None:
            final_state = initial_state
        else:
            final_state = empty(q, _state_shape(q, v, cu_seqlens), "float32")
    return out, final_state


def gdn_chunk_forward(q, k, v, g, beta, *, scale=None, initial_state=None,
                      output_final_state=False, use_qk_l2norm=False, cu_seqlens=None, out=None,
                      final_state=None, backend="auto", stream=None, validate_indices=False,
                      cpu_threads=0, state_indices=None):
    """Gated DeltaNet chunked prefill (attnkit::gdn_chunk_forward), per value head and token:
    S <- exp(g) S;  v' = beta (v - S^T k);  S <- S + k v'^T;  o = S^T (scale q).

    q, k [B, T, H, K]; v [B, T, HV, V]; g (fp32, natural-log gate) and beta [B, T, HV];
    cu_seqlens int32 [N+1] (then B = 1); initial_state fp32 [N, HV, K, V] (or the key-last layout
    [N, HV, V, K] passed transposed: any strides with K or V contiguous). Returns (o [B, T, HV, V] in
    q's dtype, final_state fp32 [N, HV, K, V] or None).

    state_indices (int32 [N]): the states live in a pool, as engines keep them: initial_state (and
    final_state) are [P, HV, K, V], sequence n reads and writes row state_indices[n]; -1 starts
    from zeros and writes nothing. With output_final_state and no final_state the pool
    initial_state is updated in place."""
    out, final_state = _gdn_outputs(q, k, v, cu_seqlens, out, output_final_state, final_state,
                                    state_indices, initial_state)
    _C.gdn_chunk_forward(q, k, v, g, beta, cu_seqlens, initial_state, final_state, out,
                         float(scale or 0.0), bool(use_qk_l2norm), backend, stream_of(q, stream),
                         bool(validate_indices), int(cpu_threads), state_indices)
    return out, final_state


def gdn_recurrent_forward(q, k, v, g, beta, *, scale=None, initial_state=None,
                          output_final_state=False, use_qk_l2norm=False, cu_seqlens=None,
                          out=None, final_state=None, cpu_threads=0, state_indices=None):
    """The token-by-token recurrence of gdn_chunk_forward on host arrays (the CPU reference)."""
    out, final_state = _gdn_outputs(q, k, v, cu_seqlens, out, output_final_state, final_state,
                                    state_indices, initial_state)
    _C.gdn_recurrent_forward(q, k, v, g, beta, cu_seqlens, initial_state, final_state, out,
                             float(scale or 0.0), bool(use_qk_l2norm), int(cpu_threads),
                             state_indices)
    return out, final_state


def gdn_decode_step(q, k, v, g, beta, state_pool, state_indices, *, scale=None,
                    use_qk_l2norm=False, out=None, backend="auto", stream=None,
                    validate_indices=False, cpu_threads=0, A_log=None, a=None, dt_bias=None,
                    b=None, step_states=None, update_pool=True):
    """New Gated DeltaNet tokens per sequence against a pool of states, updated in place
    (attnkit::gdn_decode_step).

    q, k [N, H, K]; v [N, HV, V]; g fp32 and beta [N, HV]; state_pool fp32 [P, HV, K, V] (or the
    key-last pool [P, HV, V, K] passed transposed, pool.transpose(-1, -2)); state_indices int32 [N],
    distinct slots, or -1 for a padding row, skipped with its output row zero (on a CUDA device
    without validate_indices any slot outside [0, P) is skipped so). Returns o [N, HV, V] in q's
    dtype.

    Fused gating (vLLM / SGLang's decode): pass g = beta = None and the layer's A_log, dt_bias
    (fp32 [HV]) and a, b ([N, HV], one dtype): g = -exp(A_log) softplus(a + dt_bias),
    beta = sigmoid(b), computed inside the kernel.

    Several tokens per sequence (speculative verification): q, k [N, T, H, K] and every per-token
    tensor with T as its second dimension (v [N, T, HV, V], g / beta / a / b [N, T, HV]; o
    [N, T, HV, V]), run in order. step_states (fp32 [N, T, HV, K, V], written; key-last through a
    transposed view) receives the state after each token; update_pool=False leaves the pool as it
    was, for the engine to commit the accepted step."""
    _arrays(q=q, v=v)
    if out is None:
        out = empty(q, tuple(v.shape))
    _C.gdn_decode_step(q, k, v, g, beta, state_pool, state_indices, out, float(scale or 0.0),
                       bool(use_qk_l2norm), backend, stream_of(q, stream), bool(validate_indices),
                       int(cpu_threads), A_log, a, dt_bias, b, step_states, bool(update_pool))
    return out


# ---- The chunked pipeline's stages (q / k already normalised); intermediates fp32 by default.

def _exec(x, backend, stream, validate_indices, cpu_threads):
    return backend, stream_of(x, stream), bool(validate_indices), int(cpu_threads)


def gdn_num_chunks(q, cu_seqlens=None):
    """Number of 64-token chunks (reads cu_seqlens; synchronises when it is on a CUDA device)."""
    return _C.gdn_num_chunks(q, cu_seqlens)


def gdn_chunk_cumsum(g, *, cu_seqlens=None, out=None, backend="auto", stream=None,
                     validate_indices=False, cpu_threads=0):
    """1. g_cum [B, T, HV] fp32: the chunk-local cumulative sum of g."""
    if out is None:
        out = empty(g, tuple(g.shape), "float32")
    _C.gdn_chunk_cumsum(g, cu_seqlens, out, *_exec(g, backend, stream, validate_indices, cpu_threads))
    return out


def gdn_kkt_inverse(k, beta, g_cum, *, cu_seqlens=None, out=None, dtype="float32",
                    backend="auto", stream=None, validate_indices=False, cpu_threads=0):
    """2. a_inv [B, T, HV, 64] = (I + strict_lower(diag(beta) (K K^T (.) Gamma)))^-1 per chunk."""
    if out is None:
        out = empty(k, tuple(g_cum.shape) + (64,), dtype)
    _C.gdn_kkt_inverse(k, beta, g_cum, cu_seqlens, out,
                       *_exec(k, backend, stream, validate_indices, cpu_threads))
    return out


def gdn_wu(k, v, beta, g_cum, a_inv, *, cu_seqlens=None, w=None, u=None, dtype="float32",
           backend="auto", stream=None, validate_indices=False, cpu_threads=0):
    """3. The WY form: w = a_inv diag(beta exp(g_cum)) K [B, T, HV, K]; u = a_inv diag(beta) V
    [B, T, HV, V]. Returns (w, u)."""
    if w is None:
        w = empty(k, tuple(v.shape[:3]) + (k.shape[3],), dtype)
    if u is None:
        u = empty(k, tuple(v.shape), dtype)
    _C.gdn_wu(k, v, beta, g_cum, a_inv, cu_seqlens, w, u,
              *_exec(k, backend, stream, validate_indices, cpu_threads))
    return w, u


def gdn_state_pass(k, w, u, g_cum, *, cu_seqlens=None, initial_state=None,
                   output_final_state=False, h=None, v_new=None, final_state=None,
                   dtype="float32", backend="auto", stream=None, validate_indices=False,
                   cpu_threads=0):
    """4. The state pass: per chunk, v_new = u - w S; S <- exp(g_last) S + K^T diag(exp(g_last -
    g_cum)) v_new. Returns (h [num_chunks, HV, K, V], v_new [B, T, HV, V], final_state or None)."""
    if h is None:
        h = empty(k, (gdn_num_chunks(k, cu_seqlens), u.shape[2], k.shape[3], u.shape[3]), dtype)
    if v_new is None:
        v_new = empty(k, tuple(u.shape), dtype)
    if output_final_state and final_state is None:
        final_state = empty(k, _state_shape(k, u, cu_seqlens), "float32")
    _C.gdn_state_pass(k, w, u, g_cum, cu_seqlens, initial_state, h, v_new, final_state,
                      *_exec(k, backend, stream, validate_indices, cpu_threads))
    return h, v_new, final_state


def gdn_chunk_output(q, k, v_new, h, g_cum, *, scale=None, cu_seqlens=None, out=None,
                     backend="auto", stream=None, validate_indices=False, cpu_threads=0):
    """5. The chunk output: O = scale (exp(g_cum) (.) (Q S_c) + tril(Q K^T (.) Gamma) v_new), in
    q's dtype [B, T, HV, V]."""
    if out is None:
        out = empty(q, tuple(v_new.shape[:3]) + (v_new.shape[3],), None)
    _C.gdn_chunk_output(q, k, v_new, h, g_cum, cu_seqlens, out, float(scale or 0.0),
                        *_exec(q, backend, stream, validate_indices, cpu_threads))
    return out
