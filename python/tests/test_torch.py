"""The torch face: the drop-in modules (attnkit.flash_attn_interface, attnkit.fla) against float64
references, the custom ops under torch.library.opcheck and torch.compile(fullgraph=True), CUDA
graph capture, streams and errors. Host tensors run the CPU backend; where a GPU is present every
test runs on it too (bf16, the GPU kernels' head sizes)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the torch tests are skipped")

import attnkit  # noqa: E402
from attnkit import fla, flash_mla, torch_ops  # noqa: E402
from attnkit import flash_attn_interface as fai  # noqa: E402
from reference import attention_seq, gdn_recurrent, rel_l2  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and attnkit.build_info()["cuda"]
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])


def dtype_for(device):
    return torch.bfloat16 if device == "cuda" else torch.float32


def tol_for(device):
    return 1e-2 if device == "cuda" else 2e-3  # bf16 inputs vs float64 on the same rounded inputs


def np64(t):
    return t.detach().float().cpu().numpy().astype(np.float64)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------- FlashAttention-3 drop-in

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "kw",
    [dict(), dict(causal=True), dict(window_size=(6, 3)), dict(causal=True, softcap=5.0),
     dict(attention_chunk=8, causal=True), dict(s_aux=True, window_size=(16, 0))],
    ids=["none", "causal", "window", "softcap", "chunk", "sinks"],
)
def test_flash_attn_func(device, kw):
    dt = dtype_for(device)
    b, sq, sk, hq, hkv, d = 2, 33, 70, 8, 2, 128
    q = torch.randn(b, sq, hq, d, device=device, dtype=dt)
    k = torch.randn(b, sk, hkv, d, device=device, dtype=dt)
    v = torch.randn(b, sk, hkv, d, device=device, dtype=dt)
    kw = dict(kw)
    s_aux = torch.randn(hq, device=device) if kw.pop("s_aux", False) else None
    out, lse = fai.flash_attn_func(q, k, v, return_attn_probs=True, s_aux=s_aux, **kw)
    assert out.shape == (b, sq, hq, d) and out.dtype == dt
    assert lse.shape == (b, hq, sq) and lse.dtype == torch.float32
    causal = kw.get("causal", False)
    window = list(kw.get("window_size", (-1, -1)))
    for i in range(b):
        ref, ref_lse = attention_seq(np64(q[i]), np64(k[i]), np64(v[i]), d ** -0.5, causal, window,
                                     kw.get("attention_chunk", 0), kw.get("softcap", 0.0),
                                     None if s_aux is None else np64(s_aux))
        assert rel_l2(np64(out[i]), ref) < tol_for(device)
        np.testing.assert_allclose(np64(lse[i]).T, ref_lse, atol=2e-3)
    assert torch.equal(fai.flash_attn_func(q, k, v, **{**kw, "s_aux": s_aux}), out)


@pytest.mark.parametrize("device", DEVICES)
def test_flash_attn_varlen_func(device):
    dt = dtype_for(device)
    lens_q, lens_k = [5, 1, 40, 0], [9, 64, 40, 13]
    cu_q = torch.tensor(np.cumsum([0] + lens_q), dtype=torch.int32, device=device)
    cu_k = torch.tensor(np.cumsum([0] + lens_k), dtype=torch.int32, device=device)
    hq, hkv, d = 4, 4, 64
    q = torch.randn(sum(lens_q), hq, d, device=device, dtype=dt)
    k = torch.randn(sum(lens_k), hkv, d, device=device, dtype=dt)
    v = torch.randn(sum(lens_k), hkv, d, device=device, dtype=dt)
    out, lse = fai.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                          causal=True, return_attn_probs=True)
    assert lse.shape == (hq, sum(lens_q))
    for i in range(4):
        if lens_q[i] == 0:
            continue
        a, bq = int(cu_q[i]), int(cu_q[i + 1])
        c, bk = int(cu_k[i]), int(cu_k[i + 1])
        ref, _ = attention_seq(np64(q[a:bq]), np64(k[c:bk]), np64(v[c:bk]), d ** -0.5, causal=True)
        assert rel_l2(np64(out[a:bq]), ref) < tol_for(device)


def paged_cache(k, v, lens, page, rng_pages, device):
    """A paged cache holding sequence i's first lens[i] keys of k / v ([B, S, H, D])."""
    b, _, h, d = k.shape
    max_pages = -(-k.shape[1] // page)
    num_pages = b * max_pages + 3
    perm = torch.randperm(num_pages, generator=rng_pages)[: b * max_pages]
    table = perm.view(b, max_pages).to(torch.int32).to(device)
    kc = torch.randn(num_pages, page, h, d, dtype=k.dtype, device=device)
    vc = torch.randn(num_pages, page, h, d, dtype=k.dtype, device=device)
    for i in range(b):
        for t in range(lens[i]):
            kc[table[i, t // page], t % page] = k[i, t]
            vc[table[i, t // page], t % page] = v[i, t]
    return kc, vc, table


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("page", [None, 1, 16])
@pytest.mark.parametrize("new_tokens", [0, 3])
def test_flash_attn_with_kvcache(device, page, new_tokens):
    dt = dtype_for(device)
    b, cap, hq, hkv, d = 3, 48, 8, 2, 128
    sq = max(new_tokens, 1)
    lens = [17, 0, 40]
    kfull = torch.randn(b, cap, hkv, d, device=device, dtype=dt)
    vfull = torch.randn(b, cap, hkv, d, device=device, dtype=dt)
    q = torch.randn(b, sq, hq, d, device=device, dtype=dt)
    knew = torch.randn(b, new_tokens, hkv, d, device=device, dtype=dt) if new_tokens else None
    vnew = torch.randn(b, new_tokens, hkv, d, device=device, dtype=dt) if new_tokens else None
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    if page is None:
        kc, vc, table = kfull.clone(), vfull.clone(), None
    else:
        kc, vc, table = paged_cache(kfull, vfull, lens, page, torch.Generator().manual_seed(1), device)
    out, lse, *_ = fai.flash_attn_with_kvcache(q, kc, vc, k=knew, v=vnew, cache_seqlens=seqlens,
                                               page_table=table, causal=True,
                                               return_softmax_lse=True)
    assert lse.shape == (b, hq, sq)
    for i in range(b):
        keys = kfull[i, : lens[i]]
        vals = vfull[i, : lens[i]]
        if new_tokens:
            keys, vals = torch.cat([keys, knew[i]]), torch.cat([vals, vnew[i]])
        ref, _ = attention_seq(np64(q[i]), np64(keys), np64(vals), d ** -0.5, causal=True)
        assert rel_l2(np64(out[i]), ref) < tol_for(device)
        if new_tokens:  # the new tokens were written into the cache
            pos = torch.arange(lens[i], lens[i] + new_tokens, device=device)
            if table is None:
                got = kc[i, pos]
            else:
                got = kc[table[i, pos // page].long(), pos % page]
            assert torch.equal(got, knew[i])


@pytest.mark.parametrize("device", DEVICES)
def test_flash_attn_with_kvcache_batch_idx(device):
    dt = dtype_for(device)
    b_cache, b, cap, h, d = 5, 2, 32, 4, 64
    kc = torch.randn(b_cache, cap, h, d, device=device, dtype=dt)
    vc = torch.randn(b_cache, cap, h, d, device=device, dtype=dt)
    q = torch.randn(b, 1, h, d, device=device, dtype=dt)
    idx = torch.tensor([3, 0], dtype=torch.int32, device=device)
    seqlens = torch.tensor([20, 9], dtype=torch.int32, device=device)
    out = fai.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, cache_batch_idx=idx)
    for i in range(b):
        r, n = int(idx[i]), int(seqlens[i])
        ref, _ = attention_seq(np64(q[i]), np64(kc[r, :n]), np64(vc[r, :n]), d ** -0.5)
        assert rel_l2(np64(out[i]), ref) < tol_for(device)


def test_flash_attn_unsupported_arguments_raise():
    q = torch.randn(1, 4, 2, 64)
    k = torch.randn(1, 4, 2, 64)
    with pytest.raises(NotImplementedError, match="qv"):
        fai.flash_attn_func(q, k, k, qv=q)
    with pytest.raises(NotImplementedError, match="sm_margin"):
        fai.flash_attn_func(q, k, k, sm_margin=4)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="seqused_q"):
        fai.flash_attn_varlen_func(q[0], k[0], k[0], cu, cu, 4, 4, seqused_q=cu[1:])
    with pytest.raises(NotImplementedError, match="rotary_cos"):
        fai.flash_attn_with_kvcache(q, k, k, rotary_cos=torch.ones(4, 32), rotary_sin=torch.ones(4, 32))
    with pytest.raises(NotImplementedError, match="cache_leftpad"):
        fai.flash_attn_with_kvcache(q, k, k, cache_leftpad=torch.zeros(1, dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="backward"):
        fai.flash_attn_func(q.requires_grad_(), k, k)


# ---------------------------------------------------------------- FlashMLA drop-in

@pytest.mark.parametrize("s_q,causal", [(1, False), (2, True)])
def test_flash_mla_with_kvcache(s_q, causal):
    """FlashMLA's call on a paged latent cache (pages of 64, out of order; NaN past each sequence)
    equals attention over each sequence's gathered latent rows, K all 576 values and V the first
    512, in float64; LSE [B, h_q, s_q]."""
    b, h_q, page, d, dv = 2, 16, 64, 576, 512
    lens = torch.tensor([100, 7], dtype=torch.int32)
    table = torch.tensor([[3, 0], [1, 2]], dtype=torch.int32)
    cache = torch.full((4, page, 1, d), float("nan"), dtype=torch.bfloat16)
    rows = {}
    for i, n in enumerate(lens.tolist()):
        lat = (torch.randn(n, 1, d) * 0.5).bfloat16()
        rows[i] = lat
        for j in range(n):
            cache[table[i, j // page], j % page] = lat[j]
    q = (torch.randn(b, s_q, h_q, d) * 0.5).bfloat16()
    meta, splits = flash_mla.get_mla_metadata(lens, s_q * h_q, 1)
    out, lse = flash_mla.flash_mla_with_kvcache(q, cache, table, lens, dv, meta, splits,
                                                causal=causal)
    assert out.shape == (b, s_q, h_q, dv) and out.dtype == torch.bfloat16
    assert lse.shape == (b, h_q, s_q) and lse.dtype == torch.float32
    for i in range(b):
        lat = np64(rows[i])
        ref, ref_lse = attention_seq(np64(q[i]), lat, lat[..., :dv], d ** -0.5, causal)
        assert rel_l2(np64(out[i]), ref) < 1e-2
        np.testing.assert_allclose(np64(lse[i]).T, ref_lse, rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError, match="is_fp8_kvcache"):
        flash_mla.flash_mla_with_kvcache(q, cache, table, lens, dv, meta, splits,
                                         is_fp8_kvcache=True)
    with pytest.raises(NotImplementedError, match="indices"):
        flash_mla.flash_mla_with_kvcache(q, cache, table, lens, dv, meta, splits,
                                         indices=table)


# ---------------------------------------------------------------- flash-linear-attention drop-in

def gdn_inputs(device, b, t, h, hv, d, dt):
    q = torch.nn.functional.normalize(torch.randn(b, t, h, d, device=device), dim=-1).to(dt)
    k = torch.nn.functional.normalize(torch.randn(b, t, h, d, device=device), dim=-1).to(dt)
    v = torch.randn(b, t, hv, d, device=device).to(dt)
    g = torch.nn.functional.logsigmoid(torch.randn(b, t, hv, device=device))
    beta = torch.rand(b, t, hv, device=device).sigmoid()
    return q, k, v, g, beta


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("state_v_first", [False, True])
def test_chunk_gated_delta_rule_varlen(device, state_v_first):
    dt, d = dtype_for(device), 128
    lens = [100, 3, 64]
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int64, device=device)
    q, k, v, g, beta = gdn_inputs(device, 1, sum(lens), 2, 4, d, dt)
    h0 = torch.randn(3, 4, d, d, device=device) * 0.1
    h0_in = h0.transpose(-1, -2).contiguous() if state_v_first else h0
    o, ht = fla.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0_in,
                                       output_final_state=True, use_qk_l2norm_in_kernel=True,
                                       state_v_first=state_v_first, cu_seqlens=cu)
    assert o.dtype == dt and ht.dtype == torch.float32
    assert ht.shape == h0_in.shape
    if state_v_first:
        ht = ht.transpose(-1, -2)
    for i in range(3):
        s = slice(int(cu[i]), int(cu[i + 1]))
        ref_o, ref_s = gdn_recurrent(np64(q[0, s]), np64(k[0, s]), np64(v[0, s]), np64(g[0, s]),
                                     np64(beta[0, s]), d ** -0.5, np64(h0[i]), l2norm=True)
        assert rel_l2(np64(o[0, s]), ref_o) < 1e-2
        assert rel_l2(np64(ht[i]), ref_s) < 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_chunk_gated_delta_rule_gate_and_beta_options(device):
    dt, d, hv = dtype_for(device), 128, 2
    q, k, v, _, _ = gdn_inputs(device, 2, 70, 1, hv, d, dt)
    a = torch.randn(2, 70, hv, device=device)
    b = torch.randn(2, 70, hv, device=device)
    A_log = torch.randn(hv, device=device) * 0.5
    dt_bias = torch.randn(hv, device=device)
    o, _ = fla.chunk_gated_delta_rule(q, k, v, a, b, use_gate_in_kernel=True, A_log=A_log,
                                      dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True,
                                      allow_neg_eigval=True)
    g = -A_log.exp() * torch.nn.functional.softplus(a + dt_bias)
    o_ref, _ = fla.chunk_gated_delta_rule(q, k, v, g, 2 * b.sigmoid())
    assert rel_l2(np64(o), np64(o_ref)) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("state_v_first", [False, True])
def test_fused_recurrent_one_token_matches_the_recurrence(device, state_v_first):
    dt, d = dtype_for(device), 128
    q, k, v, g, beta = gdn_inputs(device, 5, 1, 2, 4, d, dt)
    h0 = torch.randn(5, 4, d, d, device=device) * 0.1
    h0_in = h0.transpose(-1, -2).contiguous() if state_v_first else h0
    before = h0_in.clone()
    o, ht = fla.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0_in,
                                                 output_final_state=True,
                                                 state_v_first=state_v_first)
    assert torch.equal(h0_in, before), "the initial state must not change"
    if state_v_first:
        ht = ht.transpose(-1, -2)
    for i in range(5):
        ref_o, ref_s = gdn_recurrent(np64(q[i]), np64(k[i]), np64(v[i]), np64(g[i]), np64(beta[i]),
                                     d ** -0.5, np64(h0[i]))
        assert rel_l2(np64(o[i]), ref_o) < 1e-2
        assert rel_l2(np64(ht[i]), ref_s) < 1e-2


def test_fla_unsupported_arguments_raise():
    q, k, v, g, beta = gdn_inputs("cpu", 1, 4, 1, 1, 32, torch.float32)
    with pytest.raises(NotImplementedError, match="gk"):
        fla.fused_recurrent_gated_delta_rule(q, k, v, gk=g[..., None].expand(-1, -1, -1, 32))
    with pytest.raises(NotImplementedError, match="cp_context"):
        fla.chunk_gated_delta_rule(q, k, v, g, beta, cp_context=object())
    with pytest.raises(NotImplementedError, match="no_such_flag"):
        fla.chunk_gated_delta_rule(q, k, v, g, beta, no_such_flag=True)
    with pytest.raises(ValueError, match="batch size"):
        fla.chunk_gated_delta_rule(q.expand(2, -1, -1, -1), k.expand(2, -1, -1, -1),
                                   v.expand(2, -1, -1, -1), g.expand(2, -1, -1),
                                   beta.expand(2, -1, -1), cu_seqlens=torch.tensor([0, 4]))
    with pytest.raises(NotImplementedError, match="backward"):
        fla.chunk_gated_delta_rule(q.requires_grad_(), k, v, g, beta)


# ---------------------------------------------------------------- paged KV cache append

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("hnd", [False, True], ids=["NHD", "HND"])
@pytest.mark.parametrize("fp8", [None, "tensor", "head", "token"])
def test_append_kv_cache(device, hnd, fp8):
    pages, page, hkv, d, t = 6, 16, 2, 64, 9
    k, v = (torch.randn(t, hkv, d, device=device, dtype=torch.bfloat16) * 3 for _ in range(2))
    slots = torch.tensor([17, -1, 0, 95, 40, 41, -1, 3, 60], dtype=torch.int32, device=device)
    cdt = torch.float8_e4m3fn if fp8 else torch.bfloat16
    shape = (pages, hkv, page, d) if hnd else (pages, page, hkv, d)
    caches = [torch.randn(shape, device=device).to(cdt) for _ in range(2)]
    views = [c.transpose(1, 2) if hnd else c for c in caches]
    before = [c.float().contiguous() for c in views]
    scales = {None: None, "tensor": lambda: torch.tensor([0.02], device=device),
              "head": lambda: torch.tensor([0.02, 0.03], device=device),
              "token": lambda: torch.full((pages, page, hkv), float("nan"), device=device)}[fp8]
    ks, vs = (scales(), scales()) if fp8 else (None, None)
    attnkit.append_kv_cache(k, v, views[0], views[1], slots, k_scale=ks, v_scale=vs)
    filled = slots[slots >= 0].long()
    for x, view, old, sc in zip((k, v), views, before, (ks, vs)):
        want = old.clone()
        rows = x[slots >= 0].float()
        if fp8 == "token":
            amax = rows.abs().amax(dim=-1)
            got_scale = sc.view(-1, hkv)[filled]
            # IEEE division, as the CPU computes it (torch on CUDA multiplies by 1 / 448 instead)
            want_scale = (amax.double() / 448).float()
            assert torch.equal(got_scale, want_scale), "per-token scales are max|x| / 448"
            rows = (rows / got_scale[..., None]).to(cdt).float()
        elif fp8:
            rows = (rows / sc.view(1, -1, 1)).clamp(-448, 448).to(cdt).float()  # saturates
        want.view(-1, hkv, d)[filled] = rows
        got = view.float().contiguous()
        assert torch.equal(torch.nan_to_num(got, 7.0), torch.nan_to_num(want, 7.0))


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build of attnkit")
def test_append_kv_cache_cuda_matches_cpu_bit_for_bit():
    k = torch.randn(33, 4, 128, dtype=torch.bfloat16) * 5
    slots = torch.randperm(8 * 16)[:33].to(torch.int32)
    slots[::7] = -1
    out = {}
    for dev in ("cpu", "cuda"):
        kc = torch.zeros(8, 16, 4, 128, dtype=torch.float8_e4m3fn, device=dev)
        vc = kc.clone()
        ks = torch.zeros(8, 16, 4, device=dev)
        vs = torch.tensor([0.01, 0.02, 0.03, 0.04], device=dev)
        attnkit.append_kv_cache(k.to(dev), (k * 0.1).to(dev), kc, vc, slots.to(dev), k_scale=ks,
                                v_scale=vs)
        out[dev] = [x.cpu().view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x.cpu()
                    for x in (kc, vc, ks)]
    for a, b in zip(out["cpu"], out["cuda"]):
        assert torch.equal(a, b)


def test_append_kv_cache_errors_name_the_argument():
    k = torch.randn(3, 2, 64, dtype=torch.bfloat16)
    kc = torch.zeros(2, 4, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"slot_mapping\[1\] = 8"):
        attnkit.append_kv_cache(k, k, kc, kc.clone(), torch.tensor([0, 8, 1], dtype=torch.int32))
    with pytest.raises(ValueError, match="k_scale is required"):
        attnkit.append_kv_cache(k, k, kc.to(torch.float8_e4m3fn), kc.to(torch.float8_e4m3fn),
                                torch.tensor([0, 1, 2], dtype=torch.int32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["tensor", "head", "token"])
@pytest.mark.parametrize("hnd", [False, True], ids=["NHD", "HND"])
def test_attention_reads_an_fp8_kv_cache(device, kind, hnd):
    """A decode step over a paged FP8 cache filled by append_kv_cache equals the same step over
    the dequantised cache (k_scale * k, v_scale * v) in bf16, up to bf16 rounding. HND: caches
    [pages, Hkv, page, D] (and per-token scales [pages, Hkv, page]) passed as transposed views."""
    b, hq, hkv, d, page, pages = 3, 8, 2, 128, 16, 12
    lens = torch.tensor([37, 1, 60], dtype=torch.int32)
    table = torch.randperm(pages)[: b * 4].view(b, 4).to(torch.int32)

    def cache(*shape, dtype=torch.float32):  # [pages, page, hkv, ...]; HND: a view of the other
        if hnd:
            return torch.zeros(shape[0], shape[2], shape[1], *shape[3:], dtype=dtype,
                               device=device).transpose(1, 2)
        return torch.zeros(*shape, dtype=dtype, device=device)

    kc, vc = (cache(pages, page, hkv, d, dtype=torch.float8_e4m3fn) for _ in range(2))
    scale = {"tensor": lambda: torch.tensor([0.0], device=device),
             "head": lambda: torch.zeros(hkv, device=device),
             "token": lambda: cache(pages, page, hkv)}[kind]
    ks, vs = scale(), scale()
    for x in (ks, vs):
        if kind != "token":
            x.uniform_(0.01, 0.05)
    for i, n in enumerate(lens.tolist()):
        pos = torch.arange(n)
        slots = (table[i, pos // page].long() * page + pos % page).to(torch.int32)
        k, v = (torch.randn(n, hkv, d, dtype=torch.bfloat16) * 4 for _ in range(2))
        attnkit.append_kv_cache(k.to(device), v.to(device), kc, vc, slots.to(device),
                                k_scale=ks, v_scale=vs)
    q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device=device)
    dq = {"tensor": lambda c, s: c.float() * s,
          "head": lambda c, s: c.float() * s.view(1, 1, -1, 1),
          "token": lambda c, s: c.float() * s[..., None]}[kind]
    kd, vd = dq(kc, ks).to(torch.bfloat16), dq(vc, vs).to(torch.bfloat16)
    common = dict(page_table=table.to(device), seqused_k=lens.to(device), max_seqlen_k=64)
    got = attnkit.attention(q, kc, vc, k_scale=ks, v_scale=vs, **common).float()
    want = attnkit.attention(q, kd, vd, **common).float()
    assert rel_l2(np64(got), np64(want)) < 1e-2


SCALE_SHAPE = {"tensor": lambda x: (1,), "head": lambda x: (x.shape[-2],),
               "token": lambda x: tuple(x.shape[:-1])}


def dequantize(x8, scale):
    """scale * x8 in fp32, scale of one of quantize_fp8's shapes (trailing dims broadcast)."""
    s = scale if scale.dim() == x8.dim() - 1 else scale.view(*scale.shape, *([1] * (x8.dim() - 1 - scale.dim())))
    if scale.numel() == 1:
        s = scale.view([1] * (x8.dim() - 1))
    elif scale.dim() == 1:
        s = scale.view([1] * (x8.dim() - 2) + [-1])
    return x8.float() * s[..., None]


@pytest.mark.parametrize("granularity", ["tensor", "head", "token"])
def test_quantize_fp8(granularity):
    """scale = max |x| / 448 over each group, and scale * e4m3 within e4m3's rounding of x."""
    x = torch.randn(3, 17, 4, 64, dtype=torch.bfloat16) * 3
    x8, scale = attnkit.quantize_fp8(x, granularity=granularity)
    assert x8.dtype == torch.float8_e4m3fn and x8.shape == x.shape
    assert scale.dtype == torch.float32 and scale.shape == SCALE_SHAPE[granularity](x)
    xf = x.float().abs()
    amax = {"tensor": lambda: xf.amax().view(1), "head": lambda: xf.amax(dim=(0, 1, 3)),
            "token": lambda: xf.amax(dim=-1)}[granularity]()
    torch.testing.assert_close(scale, amax / 448, rtol=1e-6, atol=0)
    err = (dequantize(x8, scale) - x.float()).abs()
    # e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 of the value; the smallest normal steps
    # (2^-9 of the group's scale) bound the subnormal range.
    full = scale if scale.numel() > 1 else scale.expand(1)
    bound = x.float().abs() * 2 ** -4 + dequantize(torch.ones_like(x8), full) * 2 ** -9
    assert bool((err <= bound).all())
    with pytest.raises(ValueError, match="granularity"):
        attnkit.quantize_fp8(x, granularity="row")


@pytest.mark.parametrize("q_kind", ["tensor", "head", "token"])
@pytest.mark.parametrize("kv_kind", ["tensor", "head", "token"])
def test_fp8_attention_matches_the_dequantised_inputs(q_kind, kv_kind):
    """FP8 Q, K, V (quantize_fp8) with q_scale / k_scale / v_scale equal attention over the
    dequantised fp32 inputs; the output is bf16 by default."""
    q = torch.randn(2, 9, 8, 64)
    k, v = torch.randn(2, 30, 2, 64), torch.randn(2, 30, 2, 64)
    (q8, qs), (k8, ks), (v8, vs) = (attnkit.quantize_fp8(x, granularity=g)
                                    for x, g in ((q, q_kind), (k, kv_kind), (v, kv_kind)))
    got = attnkit.attention(q8, k8, v8, q_scale=qs, k_scale=ks, v_scale=vs, causal=True)
    assert got.dtype == torch.bfloat16
    want = attnkit.attention(dequantize(q8, qs), dequantize(k8, ks), dequantize(v8, vs),
                             causal=True)
    assert rel_l2(np64(got), np64(want)) < 4e-3  # bf16 rounding of the output
    assert rel_l2(np64(got), np64(attnkit.attention(q, k, v, causal=True))) < 0.08
    with pytest.raises(ValueError, match="q_scale"):
        attnkit.attention(q8, k8, v8, k_scale=ks, v_scale=vs)


def test_flash_attn_fp8_descales():
    """FlashAttention-3's FP8 call: e4m3 q / k / v with [B, Hk] descales (1 where None) read like
    the dequantised inputs, batched and varlen (a varlen batch whose per-token scale shape equals
    [B, Hk]); the output is bf16."""
    b, s, hq, hk, d = 3, 3, 2, 2, 64
    q, k, v = (torch.randn(b, s, h, d) for h in (hq, hk, hk))
    desc = [torch.rand(b, hk) * 0.05 + 0.01 for _ in range(3)]
    q8, k8, v8 = ((x / ds[:, None, :, None].repeat_interleave(x.shape[2] // hk, 2)).to(
        torch.float8_e4m3fn) for x, ds in zip((q, k, v), desc))
    deq = [x8.float() * ds[:, None, :, None].repeat_interleave(x8.shape[2] // hk, 2)
           for x8, ds in zip((q8, k8, v8), desc)]
    out = fai.flash_attn_func(q8, k8, v8, causal=True, q_descale=desc[0], k_descale=desc[1],
                              v_descale=desc[2])
    assert out.dtype == torch.bfloat16
    want = fai.flash_attn_func(*deq, causal=True)
    assert rel_l2(np64(out), np64(want)) < 4e-3
    # Varlen with total_q = B and Hq = Hk, so [B, Hk] is also the per-token shape: sequences of
    # 0, 2 and 1 queries (row t is not sequence t), each over its 3 keys.
    cu_q = torch.tensor([0, 0, 2, 3], dtype=torch.int32)
    cu_k = torch.arange(b + 1, dtype=torch.int32) * s
    pick = lambda x: torch.cat([x[1, :2], x[2, :1]])  # noqa: E731
    kv = lambda x: x.reshape(b * s, hk, d)  # noqa: E731
    out = fai.flash_attn_varlen_func(pick(q8), kv(k8), kv(v8), cu_q, cu_k, 2, s, causal=True,
                                     q_descale=desc[0], k_descale=desc[1], v_descale=desc[2])
    want = fai.flash_attn_varlen_func(pick(deq[0]), kv(deq[1]), kv(deq[2]), cu_q, cu_k, 2, s,
                                      causal=True)
    assert rel_l2(np64(out), np64(want)) < 4e-3
    ones = fai.flash_attn_func(q8, k8, v8)
    torch.testing.assert_close(ones, fai.flash_attn_func(q8.float(), k8.float(), v8.float()).bfloat16(),
                               rtol=1e-2, atol=1e-2)
    with pytest.raises(NotImplementedError, match="float8_e4m3fn"):
        fai.flash_attn_func(q.to(torch.float8_e5m2), k8, v8)


# ---------------------------------------------------------------- torch integration

def op_samples(device):
    dt, d = dtype_for(device), 128
    q = torch.randn(2, 9, 4, d, device=device, dtype=dt)
    k = torch.randn(2, 20, 2, d, device=device, dtype=dt)
    gq, gk, gv, g, beta = gdn_inputs(device, 1, 70, 1, 2, d, dt)
    pool = torch.randn(4, 2, d, d, device=device) * 0.1
    slots = torch.tensor([2, 0], dtype=torch.int32, device=device)
    g_cum = torch.ops.attnkit.gdn_chunk_cumsum(g, None)
    a_inv = torch.ops.attnkit.gdn_kkt_inverse(gk, beta, g_cum, None, torch.float32)
    w, u = torch.ops.attnkit.gdn_wu(gk, gv, beta, g_cum, a_inv, None, torch.float32)
    h, v_new, _ = torch.ops.attnkit.gdn_state_pass(gk, w, u, g_cum, None, None, 2, False,
                                                    torch.float32)
    return {
        "attention": (q, k, k, None, None, None, None, None, None, None, None, None, 0, 0, 0.1,
                      -1, 0, 0, 0.0, 0, True, True),
        "merge_states": (torch.randn(3, 5, 2, d, device=device), torch.randn(3, 5, 2, device=device)),
        "append_kv_cache": (k[0, :3].bfloat16(), k[1, :3].bfloat16(),
                            torch.randn(4, 4, 2, d, device=device, dtype=torch.bfloat16),
                            torch.randn(4, 4, 2, d, device=device, dtype=torch.bfloat16),
                            torch.tensor([5, -1, 2], dtype=torch.int32, device=device), None, None),
        "gdn_chunk_forward": (gq, gk, gv, g, beta, None, None, True, 0.0, True, False),
        "gdn_decode_step": (gq[0, :2], gk[0, :2], gv[0, :2], g[0, :2], beta[0, :2], pool, slots,
                            0.0, True),
        "gdn_chunk_cumsum": (g, None),
        "gdn_kkt_inverse": (gk, beta, g_cum, None, torch.float32),
        "gdn_wu": (gk, gv, beta, g_cum, a_inv, None, torch.float32),
        "gdn_state_pass": (gk, w, u, g_cum, None, None, 2, True, torch.float32),
        "gdn_chunk_output": (gq, gk, v_new, h, g_cum, None, 0.1),
    }


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_every_op(device):
    samples = op_samples(device)
    ops = torch_ops.ops()
    assert sorted(samples) == sorted(op._name for op in ops)
    for name, args in samples.items():
        result = torch.library.opcheck(getattr(torch.ops.attnkit, name).default, args)
        assert all(v == "SUCCESS" for v in result.values()), (name, result)


class TinyBlock(torch.nn.Module):
    """Attention through the FA3 drop-in and a Gated DeltaNet layer through the fla drop-in."""

    def forward(self, q, k, v, gq, gk, gv, g, beta):
        o = fai.flash_attn_func(q, k, v, causal=True)
        y, state = fla.chunk_gated_delta_rule(gq, gk, gv, g, beta, output_final_state=True)
        return o * 2, y + 1, state


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    dt, d = dtype_for(device), 128
    q = torch.randn(2, 16, 4, d, device=device, dtype=dt)
    k = torch.randn(2, 16, 2, d, device=device, dtype=dt)
    args = (q, k, k) + gdn_inputs(device, 1, 70, 1, 2, d, dt)
    model = TinyBlock()
    eager = model(*args)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    for got, want in zip(compiled(*args), eager):
        assert torch.allclose(got.float(), want.float(), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build of attnkit")
def test_cuda_graph_capture_of_a_decode_step():
    dt, b, cap, page, h, d = torch.bfloat16, 4, 256, 16, 8, 128
    kc = torch.randn(b * cap // page, page, 2, d, device="cuda", dtype=dt)
    vc = torch.randn_like(kc)
    table = torch.randperm(b * cap // page, device="cuda").view(b, -1).to(torch.int32)
    seqlens = torch.tensor([10, 200, 1, 99], dtype=torch.int32, device="cuda")
    q = torch.randn(b, 1, h, d, device="cuda", dtype=dt)
    step = lambda: fai.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, page_table=table,  # noqa: E731
                                               causal=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for trial in range(3):
        q.copy_(torch.randn_like(q))
        seqlens.copy_(torch.randint(1, cap, (b,), device="cuda", dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, step()), trial


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build of attnkit")
def test_cuda_work_goes_on_the_current_stream():
    q = torch.randn(4, 512, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(4, 4096, 8, 128, device="cuda", dtype=torch.bfloat16)
    want = fai.flash_attn_func(q, k, k)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = fai.flash_attn_func(q, k, k)
        got = out.clone()  # ordered after the kernel on s only if the kernel went on s
    torch.cuda.synchronize()
    assert torch.equal(got, want)


MIXED_DEVICE_CALLS = {
    "q cuda, k host": "attnkit.attention(q, q.cpu(), q)",
    "q host, k cuda": "attnkit.attention(q.cpu(), q, q.cpu())",
    "plan, k host": "attnkit.plan_attention(q, q.cpu(), q)",
}


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build of attnkit")
@pytest.mark.parametrize("call", sorted(MIXED_DEVICE_CALLS))
def test_cuda_mixed_devices_raise(call):
    """A call mixing host and device tensors raises ValueError naming the tensor. Run in a child
    process: such calls once crashed the interpreter, which would end the whole test run."""
    import subprocess
    import sys

    code = ("import torch, attnkit\n"
            "q = torch.randn(1, 4, 2, 128, device='cuda', dtype=torch.bfloat16)\n"
            "try:\n"
            f"    {MIXED_DEVICE_CALLS[call]}\n"
            "    print('returned')\n"
            "except ValueError as e:\n"
            "    print('ValueError:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    assert "ValueError:" in r.stdout and "but the other tensors are on" in r.stdout, r.stdout


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build of attnkit")
def test_cuda_errors_are_exceptions():
    q = torch.randn(1, 4, 2, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="dtype"):
        attnkit.attention(q, q.half(), q)
    with pytest.raises(ValueError, match="contiguous in its last dimension"):
        attnkit.attention(q, q.transpose(-1, -2).contiguous().transpose(-1, -2), q)
    kc = torch.randn(4, 16, 2, 128, device="cuda", dtype=torch.bfloat16)
    table = torch.tensor([[0, 9]], dtype=torch.int32, device="cuda")
    used = torch.tensor([20], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="page_table"):
        attnkit.attention(q, kc, kc, page_table=table, seqused_k=used, validate_indices=True)
    torch.cuda.synchronize()  # the context survived
    pool = torch.randn(2, 1, 128, 128, device="cuda")
    with pytest.raises(ValueError, match="state_indices"):
        attnkit.gdn_decode_step(q[0, :1, :1], q[0, :1, :1], q[0, :1, :1],
                                torch.zeros(1, 1, device="cuda"), torch.ones(1, 1, device="cuda"),
                                pool, torch.tensor([5], dtype=torch.int32, device="cuda"),
                                validate_indices=True)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build of attnkit")
def test_readme_example():
    q = torch.randn(4, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k_cache = torch.randn(1024, 16, 8, 128, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    page_table = torch.arange(1024, device="cuda", dtype=torch.int32).view(4, 256)
    lens = torch.tensor([100, 4000, 17, 2048], device="cuda", dtype=torch.int32)
    out = fai.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens,
                                      page_table=page_table, causal=True)
    plan = attnkit.plan_attention(q, k_cache, v_cache, page_table=page_table, seqused_k=lens,
                                  max_seqlen_k=4096, causal=True)
    out2 = attnkit.attention(q, k_cache, v_cache, page_table=page_table, seqused_k=lens,
                             max_seqlen_k=4096, causal=True, plan=plan)
    assert out.shape == (4, 1, 32, 128)
    assert torch.equal(out, out2)
    kv = k_cache.view(4, 256 * 16, 8, 128)
    vv = v_cache.view(4, 256 * 16, 8, 128)
    for i in range(4):
        n = int(lens[i])
        ref, _ = attention_seq(np64(q[i]), np64(kv[i, :n]), np64(vv[i, :n]), 128 ** -0.5, causal=True)
        assert rel_l2(np64(out[i]), ref) < 1e-2
