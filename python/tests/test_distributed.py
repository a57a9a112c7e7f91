"""attnkit.distributed: context-parallel attention and Gated DeltaNet against the same op over the
whole sequence in one process. The ring simulated in one process (each rank's blocks fed in ring
order to ring_partials, then merged), a segment's affine state transfer against the forward it
stands for, and the real thing on torch.distributed with gloo: ranks in their own processes on
host tensors, K / V passed around the ring (ring_attention), a sharded KV cache combined by its
LSE (sharded_decode), and Gated DeltaNet segments chained by their transfers
(gdn_context_parallel)."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the distributed tests are skipped")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import attnkit  # noqa: E402
from attnkit import distributed as cp  # noqa: E402
from reference import rel_l2  # noqa: E402


def full_inputs(seed, b=2, s=48, hq=4, hkv=2, d=32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, s, hq, d, generator=g)
    k = torch.randn(b, s, hkv, d, generator=g)
    v = torch.randn(b, s, hkv, d, generator=g)
    return q, k, v


def shard(x, rank, world, zigzag):
    return cp.zigzag_shard(x, rank, world) if zigzag else x.chunk(world, 1)[rank]


def unshard(parts, zigzag):
    return cp.zigzag_unshard(parts) if zigzag else torch.cat(parts, 1)


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("zigzag", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_ring_simulated_in_one_process(world, zigzag, causal):
    """Each rank's partials over the blocks in ring order (the block of rank - step at step),
    merged in fp32, equal attention over the whole sequence (out and LSE)."""
    q, k, v = full_inputs(1)
    want, want_lse = attnkit.attention(q, k, v, causal=causal, return_lse=True)
    outs, lses = [], []
    for rank in range(world):
        blocks = [(shard(k, src, world, zigzag), shard(v, src, world, zigzag), src)
                  for src in ((rank - step) % world for step in range(world))]
        parts = cp.ring_partials(shard(q, rank, world, zigzag), blocks, rank, world,
                                 causal=causal, zigzag=zigzag)
        o, lse = cp._merge(parts, q.dtype)
        outs.append(o)
        lses.append(lse)
    assert rel_l2(unshard(outs, zigzag).numpy(), want.numpy()) < 1e-5
    np.testing.assert_allclose(unshard(lses, zigzag).numpy(), want_lse.numpy(), atol=1e-4)


def test_zigzag_balances_causal_work():
    """With zigzag every rank sees the same number of key chunks causally (2W + 1 half-blocks)."""
    world = 4
    counts = []
    for rank in range(world):
        mine = cp._chunk_ids(rank, world, True)
        counts.append(sum(1 for src in range(world) for kc in cp._chunk_ids(src, world, True)
                          for qc in mine if kc <= qc))
    assert counts == [2 * world + 1] * world


def gdn_full(seed, t=200, h=1, hv=2, d=32):
    g = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(2, t, h, d, generator=g), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(2, t, h, d, generator=g), dim=-1)
    v = torch.randn(2, t, hv, d, generator=g)
    gate = torch.nn.functional.logsigmoid(torch.randn(2, t, hv, generator=g)) * 0.1
    beta = torch.rand(2, t, hv, generator=g)
    h0 = torch.randn(2, hv, d, d, generator=g) * 0.3
    return q, k, v, gate, beta, h0


GDN_CUTS = {2: [0, 70, 200], 3: [0, 64, 65, 200]}  # uneven; one segment of a single token


def gdn_segment(x, cuts, r):
    return x[:, cuts[r]:cuts[r + 1]].contiguous()


def test_gdn_segment_transfer_is_the_segment_map():
    """forward(initial S).final == M S + B for a random S; chaining the segments' transfers and
    running each segment from its entry state equals the forward over the whole sequence."""
    q, k, v, gate, beta, h0 = gdn_full(3)
    m, b = cp.gdn_segment_transfer(q, k, v, gate, beta)
    _, fin = attnkit.gdn_chunk_forward(q, k, v, gate, beta, initial_state=h0,
                                       output_final_state=True)
    assert rel_l2((m @ h0 + b).numpy(), fin.numpy()) < 1e-5
    want_o, want_fin = attnkit.gdn_chunk_forward(q, k, v, gate, beta, initial_state=h0,
                                                 output_final_state=True)
    cuts, s, outs = GDN_CUTS[3], h0, []
    for r in range(3):
        seg = [gdn_segment(x, cuts, r) for x in (q, k, v, gate, beta)]
        o, _ = attnkit.gdn_chunk_forward(*seg, initial_state=s.contiguous())
        outs.append(o)
        m, b = cp.gdn_segment_transfer(*seg)
        s = m @ s + b
    assert rel_l2(torch.cat(outs, 1).numpy(), want_o.numpy()) < 1e-5
    assert rel_l2(s.numpy(), want_fin.numpy()) < 1e-5


def _worker(rank, world, init, out_dir, kind, zigzag):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        q, k, v = full_inputs(7)
        if kind == "ring":
            o, lse = cp.ring_attention(shard(q, rank, world, zigzag), shard(k, rank, world, zigzag),
                                       shard(v, rank, world, zigzag), causal=True, zigzag=zigzag,
                                       return_lse=True)
        elif kind == "gdn":
            q, k, v, gate, beta, h0 = gdn_full(5)
            seg = [gdn_segment(x, GDN_CUTS[world], rank) for x in (q, k, v, gate, beta)]
            o, lse = cp.gdn_context_parallel(*seg, initial_state=h0, output_final_state=True)
        else:  # decode: one query per sequence, every sequence's keys split unevenly over ranks
            qd = q[:, -1:].contiguous()
            cuts = [0, 5, 30, 30, 48][: world + 1]
            cuts[-1] = k.shape[1]
            lo, hi = cuts[rank], cuts[rank + 1]
            o, lse = cp.sharded_decode(qd, k[:, lo:hi].contiguous(), v[:, lo:hi].contiguous(),
                                       return_lse=True)
        torch.save({"o": o, "lse": lse}, os.path.join(out_dir, f"{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _run(world, kind, zigzag, tmp_path):
    import torch.multiprocessing as mp

    init = "file://" + str(tmp_path / "rendezvous")
    mp.spawn(_worker, args=(world, init, str(tmp_path), kind, zigzag), nprocs=world, join=True)
    return [torch.load(tmp_path / f"{r}.pt") for r in range(world)]


@pytest.mark.parametrize("world,zigzag", [(2, True), (3, True), (2, False)])
def test_ring_attention_over_gloo(world, zigzag, tmp_path):
    q, k, v = full_inputs(7)
    want, want_lse = attnkit.attention(q, k, v, causal=True, return_lse=True)
    got = _run(world, "ring", zigzag, tmp_path)
    out = unshard([g["o"] for g in got], zigzag)
    lse = unshard([g["lse"] for g in got], zigzag)
    assert rel_l2(out.numpy(), want.numpy()) < 1e-5
    np.testing.assert_allclose(lse.numpy(), want_lse.numpy(), atol=1e-4)


@pytest.mark.parametrize("world", [2, 4])
def test_sharded_decode_over_gloo(world, tmp_path):
    """Key slices of 5 / 25 / 0 / 18 keys (one rank with none): every rank gets the combined
    result, equal to decode over all 48 keys."""
    q, k, v = full_inputs(7)
    want, want_lse = attnkit.attention(q[:, -1:].contiguous(), k, v, return_lse=True)
    for g in _run(world, "decode", False, tmp_path):
        assert rel_l2(g["o"].numpy(), want.numpy()) < 1e-5
        np.testing.assert_allclose(g["lse"].numpy(), want_lse.numpy(), atol=1e-4)


@pytest.mark.parametrize("world", [2, 3])
def test_gdn_context_parallel_over_gloo(world, tmp_path):
    """Segments of 70 / 130 and 64 / 1 / 135 tokens on 2 and 3 ranks, an initial state: the
    outputs and every rank's final state equal the forward over the whole sequences."""
    q, k, v, gate, beta, h0 = gdn_full(5)
    want_o, want_fin = attnkit.gdn_chunk_forward(q, k, v, gate, beta, initial_state=h0,
                                                 output_final_state=True)
    got = _run(world, "gdn", False, tmp_path)
    assert rel_l2(torch.cat([g["o"] for g in got], 1).numpy(), want_o.numpy()) < 1e-5
    for g in got:
        assert rel_l2(g["lse"].numpy(), want_fin.numpy()) < 1e-5  # "lse" holds the final state
