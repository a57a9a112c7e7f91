"""attnkit inside Hugging Face transformers (5.x): softmax attention through transformers'
attention-function interface, and Qwen3-Next's Gated DeltaNet layers through attnkit.fla.

    import attnkit.hf
    attnkit.hf.register()                      # once, before building the model
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="attnkit", dtype=torch.bfloat16)
    with attnkit.hf.gated_delta_rule():        # Qwen3-Next's linear-attention layers, too
        model.generate(...)

Batches must be unpadded (a padding mask raises NotImplementedError); the KV cache is transformers'
DynamicCache, whose keys end at the newest query, so masks align bottom-right as attnkit's do.
"""

import contextlib

from . import fla
from .flash_attn_interface import flash_attn_func

NAME = "attnkit"


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
              sliding_window=None, softcap=None, s_aux=None, is_causal=None, **kwargs):
    """transformers' attention-function signature: query [B, Hq, Sq, D], key / value
    [B, Hkv, Sk, D] (GQA not repeated); returns (out [B, Sq, Hq, D], None)."""
    if attention_mask is not None:
        raise NotImplementedError("attnkit.hf: padding masks are not supported (unpadded batches)")
    if dropout:
        raise NotImplementedError("attnkit.hf: attention dropout is not supported")
    for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
        if kwargs.get(name) is not None:
            raise NotImplementedError(f"attnkit.hf: packed sequences ({name}) are not supported")
    causal = module.is_causal if is_causal is None else is_causal
    # transformers' window W: a query sees W keys, itself included.
    window = (-1, -1) if sliding_window is None else (sliding_window - 1, 0 if causal else sliding_window - 1)
    out = flash_attn_func(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                          softmax_scale=scaling, causal=causal, window_size=window,
                          softcap=softcap or 0.0, s_aux=s_aux)
    return out, None


def register(name=NAME):
    """Registers attnkit under `name` with transformers' attention and mask interfaces (the mask
    function is FlashAttention's: None for unpadded batches). Returns the name."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import flash_attention_mask

    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, flash_attention_mask)
    return name


# transformers passes its own bookkeeping keywords along to the Gated DeltaNet functions.
_HF_KWARGS = ("use_cache", "output_router_logits", "position_ids", "output_attentions")


def _drop_hf_kwargs(fn):
    def call(*args, **kwargs):
        for k in _HF_KWARGS:
            kwargs.pop(k, None)
        return fn(*args, **kwargs)

    return call


@contextlib.contextmanager
def gated_delta_rule():
    """Within the block, Qwen3-Next's Gated DeltaNet layers call attnkit.fla's
    chunk_gated_delta_rule (prefill) and fused_recurrent_gated_delta_rule (decode)."""
    import transformers.models.qwen3_next.modeling_qwen3_next as qm

    saved = qm.torch_chunk_gated_delta_rule, qm.torch_recurrent_gated_delta_rule
    qm.torch_chunk_gated_delta_rule = _drop_hf_kwargs(fla.chunk_gated_delta_rule)
    qm.torch_recurrent_gated_delta_rule = _drop_hf_kwargs(fla.fused_recurrent_gated_delta_rule)
    try:
        yield
    finally:
        qm.torch_chunk_gated_delta_rule, qm.torch_recurrent_gated_delta_rule = saved


__all__ = ["NAME", "attention", "register", "gated_delta_rule"]
