"""FlashMLA's Python interface (flash_mla/flash_mla_interface.py) on attnkit: change
`from flash_mla import ...` to `from attnkit.flash_mla import ...`.

Multi-head latent attention decode (DeepSeek-V3/R1, Kimi-K2): every query head attends to one
latent cache of 576 values per token, read as the key (all 576) and as the value (its first
head_dim_v = 512). The functions keep FlashMLA's argument names, order and return values;
get_mla_metadata returns placeholders (attnkit plans on the host, inside the call).

The FP8 cache (is_fp8_kvcache) and sparse attention (indices) raise NotImplementedError. CUDA
tensors raise NotImplementedError until attnkit's MLA kernel exists; host tensors run the CPU
reference backend.
"""

from typing import Optional, Tuple

import torch

from . import _ops

__all__ = ["get_mla_metadata", "flash_mla_with_kvcache"]


def get_mla_metadata(cache_seqlens: torch.Tensor, num_heads_per_head_k: int, num_heads_k: int,
                     *args, **kwargs) -> Tuple[torch.Tensor, torch.Tensor]:
    """Placeholders for FlashMLA's (tile_scheduler_metadata, num_splits): attnkit schedules inside
    flash_mla_with_kvcache, which ignores them."""
    empty = torch.empty(0, dtype=torch.int32, device=cache_seqlens.device)
    return empty, empty


def flash_mla_with_kvcache(q: torch.Tensor, k_cache: torch.Tensor, block_table: torch.Tensor,
                           cache_seqlens: torch.Tensor, head_dim_v: int,
                           tile_scheduler_metadata: Optional[torch.Tensor] = None,
                           num_splits: Optional[torch.Tensor] = None,
                           softmax_scale: Optional[float] = None, causal: bool = False,
                           is_fp8_kvcache: bool = False,
                           indices: Optional[torch.Tensor] = None
                           ) -> Tuple[torch.Tensor, torch.Tensor]:
    """q [B, s_q, h_q, 576]; k_cache [num_blocks, page_block_size, h_k, 576] (the latent cache);
    block_table int32 [B, max_blocks]; cache_seqlens int32 [B]; head_dim_v 512. causal aligns
    the s_q new tokens at the end of each sequence. Returns (out [B, s_q, h_q, head_dim_v] in q's
    dtype, softmax_lse fp32 [B, h_q, s_q], natural log)."""
    if is_fp8_kvcache:
        raise NotImplementedError("attnkit.flash_mla: is_fp8_kvcache (FlashMLA's FP8 latent cache) "
                                  "is not supported yet")
    if indices is not None:
        raise NotImplementedError("attnkit.flash_mla: indices (sparse attention) is not supported")
    if q.is_cuda:
        raise NotImplementedError("attnkit.flash_mla: attnkit has no CUDA MLA kernel yet; host "
                                  "tensors run the CPU reference backend")
    if k_cache.shape[-1] < head_dim_v:
        raise ValueError(f"head_dim_v = {head_dim_v} exceeds the cache's {k_cache.shape[-1]} "
                         "values per token")
    b, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
    lse = torch.empty((b, h_q, s_q), dtype=torch.float32, device=q.device)
    out, _ = _ops.attention(
        q, k_cache, k_cache[..., :head_dim_v], causal=causal, scale=softmax_scale,
        page_table=block_table.to(torch.int32), seqused_k=cache_seqlens.to(torch.int32),
        max_seqlen_k=block_table.shape[1] * k_cache.shape[1], return_lse=True,
        lse=lse.permute(0, 2, 1))
    return out, lse
