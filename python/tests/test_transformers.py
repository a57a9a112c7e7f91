"""Real clients: small randomly initialised Hugging Face transformers models of five architectures
run with attnkit registered through transformers' attention interface (attnkit.hf), against the
same weights under transformers' own implementation: prefill logits within tolerance, and greedy
tokens identical over 32 steps of generation with a KV cache. On a GPU the models run in bf16
(attnkit's CUDA kernels), elsewhere in fp32 on the CPU backend. Skipped without transformers."""

import contextlib
import copy

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the transformers tests are skipped")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: its tests are skipped")

import attnkit  # noqa: E402
import attnkit.hf  # noqa: E402

HAS_CUDA = torch.cuda.is_available() and attnkit.build_info()["cuda"]
DEVICE = "cuda" if HAS_CUDA else "cpu"
DTYPE = torch.bfloat16 if HAS_CUDA else torch.float32
# Prefill logits, rel-L2 against transformers' own attention on the same weights.
LOGITS_TOL = 2e-2 if HAS_CUDA else 1e-4
NEW_TOKENS = 32

COMMON = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=64, initializer_range=0.1)


def config(arch):
    c = transformers
    if arch == "llama":
        return c.LlamaConfig(**COMMON)
    if arch == "mistral":
        return c.MistralConfig(**COMMON, sliding_window=24)
    if arch == "gemma2":
        return c.Gemma2Config(**COMMON, sliding_window=24, query_pre_attn_scalar=48,
                              attn_logit_softcapping=20.0, final_logit_softcapping=30.0)
    if arch == "gpt_oss":
        return c.GptOssConfig(**{**COMMON, "intermediate_size": 256}, sliding_window=24,
                              num_local_experts=4, num_experts_per_tok=2)
    if arch == "qwen3_next":
        return c.Qwen3NextConfig(**{**COMMON, "num_hidden_layers": 4}, linear_num_key_heads=1,
                                 linear_num_value_heads=2, linear_key_head_dim=128,
                                 linear_value_head_dim=128, num_experts=0)
    raise ValueError(arch)


# transformers' own implementation to compare against (gpt-oss has no SDPA path; SDPA cannot
# softcap, so Gemma-2 is compared with eager).
REFERENCE = {"gpt_oss": "eager", "gemma2": "eager"}


def build(cfg, impl, state=None):
    model = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation=impl,
                                                          dtype=DTYPE)
    if state is not None:
        model.load_state_dict(state)
    return model.to(DEVICE).eval()


@contextlib.contextmanager
def transformers_gated_delta_rule():
    """Qwen3-Next's Gated DeltaNet as transformers' own torch code, even where transformers found
    flash-linear-attention installed and bound its kernels."""
    import transformers.models.qwen3_next.modeling_qwen3_next as qm

    saved = qm.torch_chunk_gated_delta_rule, qm.torch_recurrent_gated_delta_rule
    qm.torch_chunk_gated_delta_rule = getattr(saved[0], "__wrapped__", saved[0])
    qm.torch_recurrent_gated_delta_rule = getattr(saved[1], "__wrapped__", saved[1])
    try:
        yield
    finally:
        qm.torch_chunk_gated_delta_rule, qm.torch_recurrent_gated_delta_rule = saved


def run(model, ids):
    with torch.inference_mode():
        logits = model(ids).logits.float()
        gen = model.generate(ids, do_sample=False, max_new_tokens=NEW_TOKENS,
                             min_new_tokens=NEW_TOKENS, pad_token_id=0)
    return logits, gen[0, ids.shape[1]:]


@pytest.mark.parametrize("arch", ["llama", "mistral", "gemma2", "gpt_oss", "qwen3_next"])
def test_model_agrees_with_transformers(arch):
    torch.manual_seed(0)
    name = attnkit.hf.register()
    cfg = config(arch)
    ref = build(cfg, REFERENCE.get(arch, "sdpa"))
    ours = build(cfg, name, ref.state_dict())
    ids = torch.randint(3, cfg.vocab_size, (1, 40), device=DEVICE)  # longer than the windows
    if arch == "qwen3_next":
        with transformers_gated_delta_rule():
            ref_logits, ref_tokens = run(ref, ids)
        with attnkit.hf.gated_delta_rule():
            logits, tokens = run(ours, ids)
    else:
        ref_logits, ref_tokens = run(ref, ids)
        logits, tokens = run(ours, ids)
    err = (torch.linalg.norm(logits - ref_logits) / torch.linalg.norm(ref_logits)).item()
    print(f"{arch}: prefill logits rel-L2 {err:.2e}; greedy tokens equal: "
          f"{int((tokens == ref_tokens).sum())}/{NEW_TOKENS}")
    assert err < LOGITS_TOL
    assert torch.equal(tokens, ref_tokens)
