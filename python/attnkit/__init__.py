"""attnkit: attention kernels for LLM inference on NVIDIA Hopper.

Ops on any DLPack array (torch, numpy, CuPy; JAX as inputs): host arrays run on the CPU reference,
CUDA arrays on the CUDA kernels, on the caller's stream.

    attention, plan_attention, Plan, merge_states          softmax attention
    append_kv_cache                                        new tokens into a paged KV cache
    quantize_fp8                                           fp16 / bf16 / fp32 to e4m3 with scales
    gdn_chunk_forward, gdn_decode_step, gdn_* stages       Gated DeltaNet

Drop-in modules with the anchors' signatures (torch):
    attnkit.flash_attn_interface   FlashAttention-3's flash_attn_func, flash_attn_varlen_func,
                                   flash_attn_with_kvcache
    attnkit.fla                    flash-linear-attention's chunk_gated_delta_rule and
                                   fused_recurrent_gated_delta_rule
    attnkit.flash_mla              FlashMLA's get_mla_metadata and flash_mla_with_kvcache (MLA
                                   decode; CPU backend for now)
    attnkit.torch_ops              the torch custom ops (torch.ops.attnkit.*) behind both

Context parallelism on torch.distributed: attnkit.distributed (ring_attention, sharded_decode).
"""

from . import _C
from ._ops import (
    Plan,
    append_kv_cache,
    attention,
    gdn_chunk_cumsum,
    gdn_chunk_forward,
    gdn_chunk_output,
    gdn_decode_step,
    gdn_kkt_inverse,
    gdn_num_chunks,
    gdn_recurrent_forward,
    gdn_state_pass,
    gdn_wu,
    merge_states,
    plan_attention,
    quantize_fp8,
)

__version__ = _C.__version__


def build_info():
    """{'version', 'cuda': whether CUDA kernels were built, 'cuda_archs'}."""
    return dict(_C.build_info())


__all__ = [
    "Plan", "append_kv_cache", "attention", "build_info", "gdn_chunk_cumsum", "gdn_chunk_forward", "gdn_chunk_output",
    "gdn_decode_step", "gdn_kkt_inverse", "gdn_num_chunks", "gdn_recurrent_forward",
    "gdn_state_pass", "gdn_wu", "merge_states", "plan_attention", "quantize_fp8",
]
