"""Float64 numpy references for the Python tests: attention over one sequence, and the Gated
DeltaNet recurrence, written from the definitions in include/attnkit/*.h."""

import numpy as np


def attention_seq(q, k, v, scale, causal=False, window=(-1, -1), chunk=0, softcap=0.0,
                  sinks=None, alibi=None):
    """q [Sq, Hq, D], k [Sk, Hkv, D], v [Sk, Hkv, Dv] -> (o [Sq, Hq, Dv], lse [Sq, Hq])."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    sq, hq, _ = q.shape
    sk, hkv, dv = v.shape
    group = hq // hkv
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    s = np.einsum("qhd,khd->hqk", q, k) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    pos = np.arange(sq)[:, None] + sk - sq
    j = np.arange(sk)[None, :]
    if alibi is not None:
        s = s - np.asarray(alibi, np.float64)[:, None, None] * np.abs(pos - j)[None]
    left, right = window
    if causal:
        right = 0
    visible = np.ones((sq, sk), bool)
    if left >= 0:
        visible &= j >= pos - left
    if right >= 0:
        visible &= j <= pos + right
    if chunk > 0:
        visible &= np.floor_divide(j, chunk) == np.floor_divide(pos, chunk)
    s = np.where(visible[None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)
    if sinks is not None:
        m = np.maximum(m, np.asarray(sinks, np.float64)[:, None, None])
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    denom = p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        denom = denom + np.exp(np.asarray(sinks, np.float64)[:, None, None] - m)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(denom > 0, np.einsum("hqk,khd->hqd", p, v) / denom, 0.0)
        lse = np.where(denom > 0, np.log(denom) + m, -np.inf)
    return o.transpose(1, 0, 2), lse[..., 0].T


def gdn_recurrent(q, k, v, g, beta, scale, h0=None, l2norm=False):
    """One sequence: q, k [T, H, K]; v [T, HV, V]; g, beta [T, HV]; h0 [HV, K, V].
    Returns (o [T, HV, V], final state [HV, K, V]) in float64."""
    q, k, v, g, beta = (np.asarray(x, dtype=np.float64) for x in (q, k, v, g, beta))
    t_len, h, kd = q.shape
    hv, vd = v.shape[1], v.shape[2]
    if l2norm:
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    S = np.zeros((hv, kd, vd)) if h0 is None else np.array(h0, dtype=np.float64)
    o = np.zeros((t_len, hv, vd))
    group = hv // h
    for t in range(t_len):
        for j in range(hv):
            qt, kt = q[t, j // group], k[t, j // group]
            S[j] *= np.exp(g[t, j])
            vd_ = beta[t, j] * (v[t, j] - S[j].T @ kt)
            S[j] += np.outer(kt, vd_)
            o[t, j] = S[j].T @ (scale * qt)
    return o, S


def rel_l2(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-30))
