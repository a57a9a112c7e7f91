"""Context parallelism on torch.distributed: attention over a sequence split across the ranks of
a process group, attnkit computing each block and merging the partial results by their LSE, and
torch.distributed (NCCL between GPUs, gloo for host tensors) moving the data.

    ring_attention   prefill: K / V blocks travel around the ring; each step's send / receive
                     overlaps the attention of the block in hand; partial outputs are merged in
                     fp32 with merge_states. zigzag (causal): the sequence is cut into 2W chunks
                     and rank r holds chunks r and 2W-1-r, so every rank does the same causal work.
    sharded_decode   decode: each rank holds a slice of every sequence's keys; partial outputs
                     and LSEs are combined with one all-gather of the LSEs and one all-reduce.
    gdn_context_parallel   Gated DeltaNet over a sequence split into contiguous segments, one
                     per rank: each segment reduced to its affine state transfer
                     (S_out = M S_in + B, by gdn_segment_transfer), the transfers gathered and
                     scanned to each rank's entry state, then each segment run from it.
    zigzag_shard / zigzag_unshard   a full sequence to a rank's zigzag shard and back.
    ring_partials    one rank's work over the ring's blocks without communication (what each
                     step computes; the ring simulated in one process uses it).

Partial outputs are fp32 where the backend writes them so (host tensors); CUDA kernels write them
in q's dtype for now, which the merge then reads.
"""

from typing import List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from . import _ops

__all__ = ["gdn_context_parallel", "gdn_segment_transfer", "ring_attention", "ring_partials",
           "sharded_decode", "zigzag_shard", "zigzag_unshard"]


def zigzag_shard(x: torch.Tensor, rank: int, world: int, dim: int = 1) -> torch.Tensor:
    """Rank `rank`'s zigzag shard of a full sequence along dim: chunks rank and 2W-1-rank of 2W."""
    chunks = x.chunk(2 * world, dim)
    if len(chunks) != 2 * world or chunks[0].shape[dim] != chunks[-1].shape[dim]:
        raise ValueError(f"zigzag: the sequence ({x.shape[dim]}) must split into {2 * world} equal "
                         "chunks")
    return torch.cat([chunks[rank], chunks[2 * world - 1 - rank]], dim)


def zigzag_unshard(shards: Sequence[torch.Tensor], dim: int = 1) -> torch.Tensor:
    """The full sequence from every rank's zigzag shard (in rank order)."""
    world = len(shards)
    first = [s.chunk(2, dim)[0] for s in shards]
    second = [s.chunk(2, dim)[1] for s in shards]
    return torch.cat(first + second[::-1], dim)


def _chunk_ids(rank: int, world: int, zigzag: bool) -> List[int]:
    """The sequence chunks a rank holds: (r, 2W-1-r) of 2W with zigzag, else (r,) of W."""
    return [rank, 2 * world - 1 - rank] if zigzag else [rank]


def _block_attention(q, k, v, causal, scale, **kw):
    """(out, lse) of one query chunk against one key chunk, out fp32 where the backend can."""
    out_dtype = "float32" if not q.is_cuda else None
    return _ops.attention(q, k, v, causal=causal, scale=scale, return_lse=True,
                          out_dtype=out_dtype, **kw)


def ring_partials(q: torch.Tensor, kv_blocks, rank: int, world: int, *, causal: bool = True,
                  scale: Optional[float] = None, zigzag: bool = True
                  ) -> List[List[Tuple[torch.Tensor, torch.Tensor]]]:
    """One rank's partial results over the ring: kv_blocks yields (k, v, src) for each step, the
    block of rank src (its shard's chunks). Returns, per local query chunk, the (out, lse) pairs
    of the key chunks it sees (causally, chunk c sees chunks before it whole and itself causally;
    without causal, every chunk whole)."""
    mine = _chunk_ids(rank, world, zigzag)
    q_chunks = q.chunk(len(mine), 1)
    parts: List[List[Tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in mine]
    for k, v, src in kv_blocks:
        theirs = _chunk_ids(src, world, zigzag)
        k_chunks, v_chunks = k.chunk(len(theirs), 1), v.chunk(len(theirs), 1)
        for qi, qc in enumerate(mine):
            for ki, kc in enumerate(theirs):
                if causal and kc > qc:
                    continue
                parts[qi].append(_block_attention(q_chunks[qi], k_chunks[ki], v_chunks[ki],
                                                  causal and kc == qc, scale))
    return parts


def _merge(parts, dtype):
    """Each query chunk's partials merged (fp32 math), concatenated back along the sequence."""
    outs, lses = [], []
    for chunk_parts in parts:
        o = torch.stack([p[0].float() for p in chunk_parts])  # [N, B, c, H, D]
        lse = torch.stack([p[1] for p in chunk_parts])        # [N, B, c, H]
        n, b, c, h, d = o.shape
        mo, ml = _ops.merge_states(o.reshape(n, b * c, h, d).contiguous(),
                                   lse.reshape(n, b * c, h).contiguous())
        outs.append(mo.reshape(b, c, h, d))
        lses.append(ml.reshape(b, c, h))
    return torch.cat(outs, 1).to(dtype), torch.cat(lses, 1)


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True,
                   scale: Optional[float] = None, zigzag: bool = True, group=None,
                   return_lse: bool = False):
    """Attention of this rank's queries over the whole sequence, split across the group's ranks.

    q [B, S_local, Hq, D], k / v [B, S_local, Hkv, D]: this rank's shard (zigzag_shard's with
    zigzag, else the rank-th contiguous W-th). Returns out [B, S_local, Hq, Dv] in q's dtype (and
    lse fp32 [B, S_local, Hq] with return_lse), equal to attention over the full sequence at
    these positions."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    to_next = lambda r: dist.get_global_rank(group, r) if group is not None else r  # noqa: E731

    def blocks():
        cur_k, cur_v = k.contiguous(), v.contiguous()
        for step in range(world):
            src = (rank - step) % world
            reqs = []
            if step + 1 < world:  # the next block comes while this one is computed
                nk, nv = torch.empty_like(cur_k), torch.empty_like(cur_v)
                ops = [dist.P2POp(dist.isend, cur_k, to_next(nxt), group),
                       dist.P2POp(dist.isend, cur_v, to_next(nxt), group),
                       dist.P2POp(dist.irecv, nk, to_next(prv), group),
                       dist.P2POp(dist.irecv, nv, to_next(prv), group)]
                reqs = dist.batch_isend_irecv(ops)
            yield cur_k, cur_v, src
            for r in reqs:
                r.wait()
            if reqs:
                cur_k, cur_v = nk, nv

    out, lse = _merge(ring_partials(q, blocks(), rank, world, causal=causal, scale=scale,
                                    zigzag=zigzag), q.dtype)
    return (out, lse) if return_lse else out


def sharded_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, group=None,
                   return_lse: bool = False, **attention_kwargs):
    """Decode against a KV cache sharded across the group: each rank holds a slice of every
    sequence's keys (any layout attnkit.attention takes: contiguous, ragged or paged, with the
    kwargs to match). Each rank attends over its slice, then the partials are combined exactly:
    LSE = log sum_r exp(LSE_r), out = sum_r exp(LSE_r - LSE) out_r (one all-gather of the LSEs,
    one all-reduce of the weighted outputs, in fp32). A rank whose slice of a sequence is empty
    contributes nothing (its LSE is -inf). Returns out in q's dtype (and lse)."""
    world = dist.get_world_size(group)
    o_r, lse_r = _ops.attention(q, k, v, return_lse=True,
                                out_dtype=None if q.is_cuda else "float32", **attention_kwargs)
    lses = [torch.empty_like(lse_r) for _ in range(world)]
    dist.all_gather(lses, lse_r.contiguous(), group=group)
    lse = torch.logsumexp(torch.stack(lses), 0)
    w = torch.exp(lse_r - lse)
    w = torch.where(torch.isfinite(lse), w, torch.zeros_like(w))  # no key anywhere: out = 0
    out = o_r.float() * w.unsqueeze(-1)
    dist.all_reduce(out, group=group)
    out = out.to(q.dtype)
    return (out, lse) if return_lse else out


def gdn_segment_transfer(q, k, v, g, beta, *, scale=None, use_qk_l2norm=False, cu_seqlens=None):
    """The affine map a Gated DeltaNet segment applies to the state it starts from:
    S_out = M S_in + B per (sequence, value head), M fp32 [N, HV, K, K], B fp32 [N, HV, K, V].
    Each token maps S to (exp(g) I - beta k k^T) S + beta k v^T, so M is the product of the
    tokens' (exp(g) I - beta k k^T) (what the segment makes of S_in = I with v = 0) and B what it
    makes of S_in = 0. Two runs of gdn_chunk_forward; q and the outputs play no part."""
    _, b = _ops.gdn_chunk_forward(q, k, v, g, beta, scale=scale, use_qk_l2norm=use_qk_l2norm,
                                  cu_seqlens=cu_seqlens, output_final_state=True)
    n, hv, kd = b.shape[0], v.shape[2], k.shape[3]
    eye = torch.eye(kd, dtype=torch.float32, device=k.device).expand(n, hv, kd, kd).contiguous()
    zeros = torch.zeros(v.shape[:3] + (kd,), dtype=v.dtype, device=v.device)
    _, m = _ops.gdn_chunk_forward(q, k, zeros, g, beta, scale=scale, use_qk_l2norm=use_qk_l2norm,
                                  cu_seqlens=cu_seqlens, initial_state=eye, output_final_state=True)
    return m, b


def gdn_context_parallel(q, k, v, g, beta, *, initial_state=None, scale=None,
                         use_qk_l2norm=False, output_final_state=False, group=None):
    """Gated DeltaNet (gdn_chunk_forward's semantics) over sequences split into contiguous
    segments, rank r holding segment r of every sequence (q, k [B, T_r, H, K], v [B, T_r, HV, V],
    g, beta [B, T_r, HV]; segments may differ in length). initial_state (fp32 [B, HV, K, V], rank
    0's) starts the sequences. Returns (o for this rank's tokens, the final state [B, HV, K, V]
    on every rank with output_final_state, else None).

    Each rank reduces its segment to its affine transfer (gdn_segment_transfer), one all-gather
    shares them, each rank composes those before it onto the initial state (its entry state),
    then runs its segment from there. The transfers' math is fp32 throughout."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    m, b = gdn_segment_transfer(q, k, v, g, beta, scale=scale, use_qk_l2norm=use_qk_l2norm)
    ms = [torch.empty_like(m) for _ in range(world)]
    bs = [torch.empty_like(b) for _ in range(world)]
    dist.all_gather(ms, m.contiguous(), group=group)
    dist.all_gather(bs, b.contiguous(), group=group)
    s = initial_state.float() if initial_state is not None else torch.zeros_like(b)
    if initial_state is not None:  # rank 0's initial state is the one that counts
        dist.broadcast(s, dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    for j in range(rank):
        s = torch.matmul(ms[j], s) + bs[j]
    o, _ = _ops.gdn_chunk_forward(q, k, v, g, beta, scale=scale, use_qk_l2norm=use_qk_l2norm,
                                  initial_state=s.contiguous())
    if not output_final_state:
        return o, None
    for j in range(rank, world):
        s = torch.matmul(ms[j], s) + bs[j]
    return o, s
