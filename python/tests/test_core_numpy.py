"""attnkit's core ops on numpy arrays (the CPU backend) against float64 references, every output
poisoned with NaN first; plans, merge_states, Gated DeltaNet (forward, stages, decode, key-last
states) and the errors bad arguments raise."""

import numpy as np
import pytest

import attnkit
from reference import attention_seq, gdn_recurrent, rel_l2

TOL = 2e-3  # fp32 inputs on the CPU backend: far under the bf16 tolerance of 5e-3


def randn(rng, *shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def nan(shape, dtype=np.float32):
    return np.full(shape, np.nan, dtype=dtype)


@pytest.mark.parametrize(
    "opts",
    [
        dict(),
        dict(causal=True),
        dict(window=(5, 2)),
        dict(causal=True, window=(9, -1)),
        dict(chunk_size=4, causal=True),
        dict(softcap=3.0),
        dict(sinks=True),
        dict(alibi=True, causal=True),
    ],
    ids=["none", "causal", "window", "causal-window", "chunked", "softcap", "sinks", "alibi"],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_attention_batched(opts, dtype):
    rng = np.random.default_rng(1)
    b, sq, sk, hq, hkv, d = 2, 7, 19, 4, 2, 64
    q, k, v = randn(rng, b, sq, hq, d, dtype=dtype), randn(rng, b, sk, hkv, d, dtype=dtype), randn(rng, b, sk, hkv, d, dtype=dtype)
    sinks = randn(rng, hq) if opts.get("sinks") else None
    alibi = np.abs(randn(rng, hq)) * 0.1 if opts.get("alibi") else None
    kw = {key: val for key, val in opts.items() if key not in ("sinks", "alibi")}
    out, lse = nan((b, sq, hq, d), dtype), nan((b, sq, hq))
    res = attnkit.attention(q, k, v, sinks=sinks, alibi_slopes=alibi, return_lse=True, out=out,
                            lse=lse, **kw)
    assert res[0] is out and res[1] is lse
    for i in range(b):
        ref_o, ref_lse = attention_seq(q[i], k[i], v[i], d ** -0.5, kw.get("causal", False),
                                       kw.get("window", (-1, -1)), kw.get("chunk_size", 0),
                                       kw.get("softcap", 0.0), sinks, alibi)
        assert not np.isnan(out[i]).any()
        assert rel_l2(out[i], ref_o) < (TOL if dtype == np.float32 else 5e-3)
        finite = np.isfinite(ref_lse)
        np.testing.assert_array_equal(np.isfinite(lse[i]), finite)
        np.testing.assert_allclose(lse[i][finite], ref_lse[finite], atol=1e-3)


def test_mla_latent_cache_read_as_k_and_v():
    """Multi-head latent attention: a paged latent cache [pages, 64, 1, 576] is K, its first 512
    values (a view of the same array) are V; out [B, Sq, Hq, 512]."""
    rng = np.random.default_rng(7)
    b, sq, hq, page, seqlens = 2, 2, 16, 64, [70, 129]
    n_pages = [(s + page - 1) // page for s in seqlens]
    cache = nan((sum(n_pages) + 1, page, 1, 576))
    table = np.zeros((b, max(n_pages)), np.int32)
    dense = []
    first = 1  # page 0 stays unused (NaN)
    for i, s in enumerate(seqlens):
        kv = randn(rng, s, 1, 576)
        dense.append(kv)
        for p in range(n_pages[i]):
            table[i, p] = first + p
            rows = kv[p * page:(p + 1) * page]
            cache[first + p, :len(rows)] = rows
        first += n_pages[i]
    q = randn(rng, b, sq, hq, 576)
    scale = 192 ** -0.5
    out, lse = attnkit.attention(q, cache, cache[..., :512], page_table=table,
                                 seqused_k=np.array(seqlens, np.int32), causal=True, scale=scale,
                                 return_lse=True)
    assert out.shape == (b, sq, hq, 512)
    for i in range(b):
        ref_o, ref_lse = attention_seq(q[i], dense[i], dense[i][..., :512], scale, True)
        assert rel_l2(out[i], ref_o) < TOL
        np.testing.assert_allclose(lse[i], ref_lse, atol=1e-3)


def test_latent_cache_append_writes_k_alone():
    """append_kv_cache with v = v_cache = None writes new latent rows (fp16, 576 values) into
    their slots of a latent cache and nothing else."""
    rng = np.random.default_rng(9)
    cache = randn(rng, 3, 64, 1, 576).astype(np.float16)
    before = cache.copy()
    new = randn(rng, 4, 1, 576).astype(np.float16)
    slots = np.array([70, -1, 5, 191], np.int32)
    attnkit.append_kv_cache(new, None, cache, None, slots)
    for t, s in enumerate(slots):
        if s >= 0:
            np.testing.assert_array_equal(cache[s // 64, s % 64], new[t])
    untouched = np.ones(3 * 64, bool)
    untouched[slots[slots >= 0]] = False
    np.testing.assert_array_equal(cache.reshape(192, 576)[untouched],
                                  before.reshape(192, 576)[untouched])


def test_attention_allocates_like_the_input():
    rng = np.random.default_rng(2)
    q, k, v = randn(rng, 1, 3, 2, 64), randn(rng, 1, 5, 2, 64), randn(rng, 1, 5, 2, 128)
    o = attnkit.attention(q, k, v)
    assert isinstance(o, np.ndarray) and o.shape == (1, 3, 2, 128) and o.dtype == np.float32


def test_attention_varlen_and_paged():
    rng = np.random.default_rng(3)
    lens_q, lens_k = [3, 1, 6], [10, 4, 17]
    hq, hkv, d, page = 4, 1, 64, 5
    cu_q = np.cumsum([0] + lens_q).astype(np.int32)
    cu_k = np.cumsum([0] + lens_k).astype(np.int32)
    q = randn(rng, cu_q[-1], hq, d)
    k, v = randn(rng, cu_k[-1], hkv, d), randn(rng, cu_k[-1], hkv, d)
    out = nan(q.shape)
    attnkit.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True, out=out)
    for i in range(3):
        ref, _ = attention_seq(q[cu_q[i]:cu_q[i + 1]], k[cu_k[i]:cu_k[i + 1]], v[cu_k[i]:cu_k[i + 1]],
                               d ** -0.5, causal=True)
        assert rel_l2(out[cu_q[i]:cu_q[i + 1]], ref) < TOL

    # The same keys in a paged cache with shuffled pages.
    max_pages = max(-(-n // page) for n in lens_k)
    num_pages = 3 * max_pages
    perm = rng.permutation(num_pages).astype(np.int32)
    table = perm[: 3 * max_pages].reshape(3, max_pages)
    kc, vc = randn(rng, num_pages, page, hkv, d), randn(rng, num_pages, page, hkv, d)
    for i in range(3):
        for t in range(lens_k[i]):
            kc[table[i, t // page], t % page] = k[cu_k[i] + t]
            vc[table[i, t // page], t % page] = v[cu_k[i] + t]
    out_paged = nan(q.shape)
    attnkit.attention(q, kc, vc, cu_seqlens_q=cu_q, page_table=table,
                      seqused_k=np.array(lens_k, np.int32), causal=True, out=out_paged)
    assert rel_l2(out_paged, out) < 1e-5


def test_plan_is_reused_and_checked():
    rng = np.random.default_rng(4)
    q, k, v = randn(rng, 2, 4, 2, 64), randn(rng, 2, 9, 2, 64), randn(rng, 2, 9, 2, 64)
    plan = attnkit.plan_attention(q, k, v, causal=True)
    assert isinstance(plan, attnkit.Plan)
    assert plan.backend == "cpu" and plan.num_splits >= 1 and plan.kernel
    o1 = attnkit.attention(q, k, v, causal=True, plan=plan)
    o2 = attnkit.attention(q, k, v, causal=True)
    np.testing.assert_array_equal(o1, o2)
    with pytest.raises(ValueError, match="backend"):
        attnkit.attention(q, k, v, causal=True, plan=plan, backend="cuda-sm90")


def test_merge_states_matches_attention_over_all_keys():
    rng = np.random.default_rng(5)
    q, k, v = randn(rng, 1, 6, 2, 64), randn(rng, 1, 30, 2, 64), randn(rng, 1, 30, 2, 64)
    parts = [attnkit.attention(q, k[:, a:b], v[:, a:b], return_lse=True)
             for a, b in ((0, 11), (11, 12), (12, 30))]
    o_parts = np.stack([p[0][0] for p in parts])
    lse_parts = np.stack([p[1][0] for p in parts])
    out, lse = attnkit.merge_states(o_parts, lse_parts, out=nan((6, 2, 64)), lse=nan((6, 2)))
    full, full_lse = attnkit.attention(q, k, v, return_lse=True)
    assert rel_l2(out, full[0]) < TOL
    np.testing.assert_allclose(lse, full_lse[0], atol=1e-4)


def gdn_inputs(rng, b, t, h, hv, kd, vd):
    q = randn(rng, b, t, h, kd, scale=0.3)
    k = randn(rng, b, t, h, kd, scale=0.3)
    v = randn(rng, b, t, hv, vd)
    g = -np.abs(randn(rng, b, t, hv, scale=0.3))
    beta = rng.uniform(0.1, 1.0, (b, t, hv)).astype(np.float32)
    return q, k, v, g, beta


@pytest.mark.parametrize("l2norm", [False, True])
def test_gdn_chunk_forward_varlen_with_states(l2norm):
    rng = np.random.default_rng(6)
    lens = [70, 0, 130, 5]
    cu = np.cumsum([0] + lens).astype(np.int32)
    h, hv, kd, vd = 2, 4, 32, 48
    q, k, v, g, beta = gdn_inputs(rng, 1, cu[-1], h, hv, kd, vd)
    h0 = randn(rng, len(lens), hv, kd, vd, scale=0.3)
    o, fin = attnkit.gdn_chunk_forward(q, k, v, g, beta, cu_seqlens=cu, initial_state=h0,
                                       output_final_state=True, use_qk_l2norm=l2norm,
                                       out=nan(v.shape), final_state=nan(h0.shape))
    for i in range(len(lens)):
        s = slice(cu[i], cu[i + 1])
        ref_o, ref_s = gdn_recurrent(q[0, s], k[0, s], v[0, s], g[0, s], beta[0, s], kd ** -0.5,
                                     h0[i], l2norm)
        if lens[i]:
            assert rel_l2(o[0, s], ref_o) < TOL
        assert rel_l2(fin[i], ref_s) < TOL


def test_gdn_key_last_states_through_transposed_views():
    rng = np.random.default_rng(7)
    q, k, v, g, beta = gdn_inputs(rng, 2, 40, 1, 2, 32, 32)
    h0 = randn(rng, 2, 2, 32, 32, scale=0.3)
    o, fin = attnkit.gdn_chunk_forward(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    h0_kl = np.ascontiguousarray(h0.transpose(0, 1, 3, 2))  # [N, HV, V, K]
    fin_kl = nan(h0_kl.shape)
    o_kl, _ = attnkit.gdn_chunk_forward(q, k, v, g, beta, initial_state=h0_kl.transpose(0, 1, 3, 2),
                                        final_state=fin_kl.transpose(0, 1, 3, 2))
    np.testing.assert_array_equal(o_kl, o)
    np.testing.assert_array_equal(fin_kl.transpose(0, 1, 3, 2), fin)


def test_gdn_stages_compose_to_the_forward():
    rng = np.random.default_rng(8)
    q, k, v, g, beta = gdn_inputs(rng, 1, 150, 2, 2, 32, 32)
    o_ref, fin_ref = attnkit.gdn_chunk_forward(q, k, v, g, beta, output_final_state=True)
    g_cum = attnkit.gdn_chunk_cumsum(g)
    a_inv = attnkit.gdn_kkt_inverse(k, beta, g_cum)
    w, u = attnkit.gdn_wu(k, v, beta, g_cum, a_inv)
    assert attnkit.gdn_num_chunks(q) == 3
    h, v_new, fin = attnkit.gdn_state_pass(k, w, u, g_cum, output_final_state=True)
    assert h.shape == (3, 2, 32, 32)
    o = attnkit.gdn_chunk_output(q, k, v_new, h, g_cum)
    assert rel_l2(o, o_ref) < TOL and rel_l2(fin, fin_ref) < TOL


@pytest.mark.parametrize("key_last", [False, True])
def test_gdn_decode_step_updates_its_slots(key_last):
    rng = np.random.default_rng(9)
    n, h, hv, kd, vd, p = 3, 1, 2, 32, 32, 6
    q, k, v, g, beta = (x[:, 0] for x in gdn_inputs(rng, n, 1, h, hv, kd, vd))
    pool = randn(rng, p, hv, kd, vd, scale=0.3)
    before = pool.copy()
    slots = np.array([4, -1, 2], np.int32)  # row 1 is padding: skipped, output 0
    if key_last:
        store = np.ascontiguousarray(pool.transpose(0, 1, 3, 2))
        view = store.transpose(0, 1, 3, 2)
    else:
        view = pool
    o = attnkit.gdn_decode_step(q, k, v, g, beta, view, slots, out=nan((n, hv, vd)))
    for i, s in enumerate(slots):
        if s < 0:
            np.testing.assert_array_equal(o[i], 0)
            continue
        ref_o, ref_s = gdn_recurrent(q[i][None], k[i][None], v[i][None], g[i][None], beta[i][None],
                                     kd ** -0.5, before[s])
        assert rel_l2(o[i], ref_o[0]) < TOL
        assert rel_l2(view[s], ref_s) < TOL
    for s in set(range(p)) - set(slots.tolist()):
        np.testing.assert_array_equal(view[s], before[s])


def test_gdn_decode_step_several_tokens_per_sequence():
    """T new tokens per sequence (speculative verification) equal the recurrent forward over those
    tokens from each sequence's pool slot; step_states holds the state after every token (the
    recurrent forward's final state over the first t + 1 tokens); update_pool=False keeps the
    pool; a padding row gets zeros."""
    rng = np.random.default_rng(13)
    n, t, h, hv, kd, vd = 3, 4, 1, 2, 32, 16
    q, k, v, g, beta = gdn_inputs(rng, n, t, h, hv, kd, vd)
    pool = randn(rng, 5, hv, kd, vd, scale=0.3)
    slots = np.array([4, -1, 1], np.int32)
    pool_run, steps = pool.copy(), nan((n, t, hv, kd, vd))
    o = attnkit.gdn_decode_step(q, k, v, g, beta, pool_run, slots, step_states=steps)
    assert o.shape == (n, t, hv, vd)
    for i, s in enumerate(slots):
        if s < 0:
            np.testing.assert_array_equal(o[i], 0)
            assert np.isnan(steps[i]).all()
            continue
        for upto in range(1, t + 1):
            sl = (slice(i, i + 1), slice(0, upto))
            o_ref, s_ref = attnkit.gdn_recurrent_forward(
                q[sl], k[sl], v[sl], g[sl], beta[sl], initial_state=pool[s][None].copy(),
                output_final_state=True)
            np.testing.assert_allclose(steps[i, upto - 1], s_ref[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(o[i], o_ref[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pool_run[s], s_ref[0], rtol=1e-5, atol=1e-6)
    kept = pool.copy()
    o2 = attnkit.gdn_decode_step(q, k, v, g, beta, kept, slots, update_pool=False)
    np.testing.assert_array_equal(kept, pool)
    np.testing.assert_array_equal(o2, o)


def test_gdn_chunk_forward_with_a_state_pool():
    """state_indices: sequences read and write pool rows (in place), -1 starts from zeros and
    writes nothing; equal to the forward on gathered states."""
    rng = np.random.default_rng(17)
    n, t, h, hv, kd, vd = 3, 70, 1, 2, 32, 16
    q, k, v, g, beta = gdn_inputs(rng, 1, n * t, h, hv, kd, vd)
    cu = np.arange(n + 1, dtype=np.int32) * t
    pool = randn(rng, 5, hv, kd, vd, scale=0.3)
    slots = np.array([4, -1, 1], np.int32)
    gathered = np.where(slots[:, None, None, None] >= 0, pool[np.maximum(slots, 0)], 0)
    o_ref, s_ref = attnkit.gdn_chunk_forward(q, k, v, g, beta, cu_seqlens=cu,
                                             initial_state=gathered.copy(),
                                             output_final_state=True)
    pooled = pool.copy()
    o, fin = attnkit.gdn_chunk_forward(q, k, v, g, beta, cu_seqlens=cu, initial_state=pooled,
                                       output_final_state=True, state_indices=slots)
    assert fin is pooled
    np.testing.assert_array_equal(o, o_ref)
    want = pool.copy()
    want[4], want[1] = s_ref[0], s_ref[2]
    np.testing.assert_array_equal(pooled, want)


def test_gdn_decode_step_fused_gating():
    """g and beta from the layer's parameters equal the explicit gates computed in float64."""
    rng = np.random.default_rng(12)
    n, h, hv, kd, vd = 3, 1, 2, 32, 32
    q, k, v, _, _ = (x[:, 0] for x in gdn_inputs(rng, n, 1, h, hv, kd, vd))
    a_log, dt_bias = randn(rng, hv, scale=0.5), randn(rng, hv, scale=0.5)
    a, b = randn(rng, n, hv, scale=2.0), randn(rng, n, hv)
    a[0, 0] = 25.0  # softplus's linear branch
    x = a.astype(np.float64) + dt_bias
    softplus = np.where(x > 20, x, np.log1p(np.exp(x)))
    g = (-np.exp(a_log.astype(np.float64)) * softplus).astype(np.float32)
    beta = (1 / (1 + np.exp(-b.astype(np.float64)))).astype(np.float32)
    pool = randn(rng, 2 * n, hv, kd, vd, scale=0.3)
    slots = np.array([4, 0, 2], np.int32)
    pool_e, pool_f = pool.copy(), pool.copy()
    o_e = attnkit.gdn_decode_step(q, k, v, g, beta, pool_e, slots)
    o_f = attnkit.gdn_decode_step(q, k, v, None, None, pool_f, slots, A_log=a_log, a=a,
                                  dt_bias=dt_bias, b=b)
    np.testing.assert_allclose(o_f, o_e, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pool_f, pool_e, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="not both"):
        attnkit.gdn_decode_step(q, k, v, g, beta, pool_f, slots, A_log=a_log, a=a,
                                dt_bias=dt_bias, b=b)


def test_errors_name_the_argument():
    rng = np.random.default_rng(10)
    q, k, v = randn(rng, 1, 3, 2, 64), randn(rng, 1, 5, 2, 64), randn(rng, 1, 5, 2, 64)
    with pytest.raises(ValueError, match="q: dtype float64"):
        attnkit.attention(q.astype(np.float64), k, v)
    with pytest.raises(ValueError, match="k head dim"):
        attnkit.attention(q, k[..., :32], v)
    with pytest.raises(NotImplementedError, match="head dim 80"):
        attnkit.attention(randn(rng, 1, 3, 2, 80), randn(rng, 1, 5, 2, 80), randn(rng, 1, 5, 2, 80))
    with pytest.raises(ValueError, match="contiguous in its last dimension"):
        attnkit.attention(np.asfortranarray(q), k, v)
    with pytest.raises(ValueError, match="out: expected a writable array"):
        ro = np.empty((1, 3, 2, 64), np.float32)
        ro.flags.writeable = False
        attnkit.attention(q, k, v, out=ro)
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        attnkit.attention(q[0], k[0], v[0], cu_seqlens_q=np.array([0, 5], np.int32),
                          cu_seqlens_k=np.array([0, 5], np.int32))
    with pytest.raises(ValueError, match="seqused_k"):
        attnkit.attention(q, k, v, page_table=np.zeros((1, 1), np.int32))
    with pytest.raises(ValueError, match="backend"):
        attnkit.attention(q, k, v, backend="tpu")
    with pytest.raises(ValueError, match="state_indices"):
        qd, kd_, vd, gd, bd = (x[:, 0] for x in gdn_inputs(rng, 2, 1, 1, 1, 32, 32))
        attnkit.gdn_decode_step(qd, kd_, vd, gd, bd, randn(rng, 2, 1, 32, 32),
                                np.array([1, 1], np.int32))
    with pytest.raises(ValueError, match="expected an array"):
        attnkit.attention([[1.0]], k, v)
    raw = np.zeros(q.nbytes + 4, np.uint8)
    misaligned = np.frombuffer(raw.data, np.float32, q.size, offset=2).reshape(q.shape)
    with pytest.raises(ValueError, match="q is not aligned"):
        attnkit.attention(misaligned, k, v)


def test_outputs_over_inputs_are_refused():
    rng = np.random.default_rng(11)
    q, k, v = randn(rng, 1, 3, 2, 64), randn(rng, 1, 5, 2, 64), randn(rng, 1, 5, 2, 64)
    with pytest.raises(ValueError, match="o shares memory with q"):
        attnkit.attention(q, k, v, out=q)
    o_parts, lse_parts = randn(rng, 2, 3, 2, 64), randn(rng, 2, 3, 2)
    with pytest.raises(ValueError, match="o shares memory with o_parts"):
        attnkit.merge_states(o_parts, lse_parts, out=o_parts[0])
    # q and o as column slices of one buffer share no element: accepted.
    fused = nan((1, 3, 2, 128))
    fused[..., :64] = q
    out = attnkit.attention(fused[..., :64], k, v, out=fused[..., 64:])
    assert rel_l2(out, attnkit.attention(q, k, v)) < TOL


def test_read_only_inputs_are_accepted():
    rng = np.random.default_rng(11)
    q, k, v = randn(rng, 1, 3, 2, 64), randn(rng, 1, 5, 2, 64), randn(rng, 1, 5, 2, 64)
    for x in (q, k, v):
        x.flags.writeable = False
    assert not np.isnan(attnkit.attention(q, k, v)).any()


def test_build_info():
    info = attnkit.build_info()
    assert info["version"] == attnkit.__version__
    assert isinstance(info["cuda"], bool)
