"""Real clients: small randomly initialised Hugging Face transformers models of five architectures
run with attnkit registered through transformers' attention interface (attnkit.hf), against the
same weights under transformers' own implementation. Skipped without transformers.

On the CPU backend the models run in fp32: prefill logits within 1e-4 (rel-L2) and greedy tokens
identical over 32 steps of generation with a KV cache.

On a GPU they run in bf16 (attnkit's CUDA kernels), where two correct implementations round
differently and a random model's near-tied logits make free-running greedy tokens part ways after
the first tie. There the truth is transformers' own implementation in fp32 on the same weights:
its greedy tokens are fed to both bf16 models step by step through their KV caches, and
- attnkit's logits error against the truth (rel-L2 per step: the prefill and each decode step),
  both its root mean square over the steps and its largest, is at most 1.5x that of transformers'
  own bf16 implementation (single steps are too noisy to compare one by one),
- at every step whose truth top-2 margin exceeds twice the bf16 reference's largest logit error
  (a decided step), attnkit's greedy token is the truth's."""

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
# fp32 prefill logits, rel-L2 against transformers' own attention on the same weights.
LOGITS_TOL = 1e-4
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


def build(cfg, impl, state=None, dtype=DTYPE):
    model = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation=impl,
                                                          dtype=dtype)
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


def teacher_forced(model, ids, tokens):
    """Next-token logits [1 + len(tokens) - 1, vocab] (fp32): after the prefill of ids, then after
    each of tokens[:-1] fed one at a time through the model's KV cache."""
    with torch.inference_mode():
        out = model(ids, use_cache=True)
        steps = [out.logits[0, -1].float()]
        for t in tokens[:-1]:
            out = model(t.view(1, 1), past_key_values=out.past_key_values, use_cache=True)
            steps.append(out.logits[0, -1].float())
    return torch.stack(steps)


def rel_l2(a, b, dim=None):
    return torch.linalg.norm(a - b, dim=dim) / torch.linalg.norm(b, dim=dim)


def gdn_context(arch, ours):
    if arch != "qwen3_next":
        return contextlib.nullcontext()
    return attnkit.hf.gated_delta_rule() if ours else transformers_gated_delta_rule()


def check_fp32(arch, cfg, ref, ours, ids):
    with gdn_context(arch, False):
        ref_logits, ref_tokens = run(ref, ids)
    with gdn_context(arch, True):
        logits, tokens = run(ours, ids)
    err = rel_l2(logits, ref_logits).item()
    print(f"{arch}: prefill logits rel-L2 {err:.2e}; greedy tokens equal: "
          f"{int((tokens == ref_tokens).sum())}/{NEW_TOKENS}")
    assert err < LOGITS_TOL
    assert torch.equal(tokens, ref_tokens)


def check_bf16(arch, cfg, ref, ours, ids):
    truth = build(cfg, REFERENCE.get(arch, "sdpa"), ref.state_dict(), torch.float32)
    with gdn_context(arch, False):
        tokens = run(truth, ids)[1]
        truth_steps = teacher_forced(truth, ids, tokens)
        ref_steps = teacher_forced(ref, ids, tokens)
    with gdn_context(arch, True):
        our_steps = teacher_forced(ours, ids, tokens)
    ref_err, our_err = rel_l2(ref_steps, truth_steps, 1), rel_l2(our_steps, truth_steps, 1)
    top2 = truth_steps.topk(2, dim=1).values
    decided = (top2[:, 0] - top2[:, 1]) > 2 * (ref_steps - truth_steps).abs().amax(dim=1)
    ours_right = our_steps.argmax(dim=1) == tokens
    ref_right = ref_steps.argmax(dim=1) == tokens
    print(f"{arch}: logits rel-L2 vs fp32, max over {len(tokens)} steps: attnkit "
          f"{our_err.max():.2e}, transformers bf16 {ref_err.max():.2e}; rms: attnkit "
          f"{our_err.square().mean().sqrt():.2e}, transformers bf16 "
          f"{ref_err.square().mean().sqrt():.2e}; greedy tokens right: "
          f"attnkit {int(ours_right.sum())}, transformers bf16 {int(ref_right.sum())} "
          f"({int(decided.sum())} decided steps)")
    rms = lambda e: e.square().mean().sqrt().item()  # noqa: E731
    assert rms(our_err) <= 1.5 * rms(ref_err), (our_err, ref_err)
    assert our_err.max().item() <= 1.5 * ref_err.max().item(), (our_err, ref_err)
    assert bool(ours_right[decided].all())


@pytest.mark.parametrize("arch", ["llama", "mistral", "gemma2", "gpt_oss", "qwen3_next"])
def test_model_agrees_with_transformers(arch):
    torch.manual_seed(0)
    name = attnkit.hf.register()
    cfg = config(arch)
    ref = build(cfg, REFERENCE.get(arch, "sdpa"))
    ours = build(cfg, name, ref.state_dict())
    ids = torch.randint(3, cfg.vocab_size, (1, 40), device=DEVICE)  # longer than the windows
    (check_bf16 if DTYPE == torch.bfloat16 else check_fp32)(arch, cfg, ref, ours, ids)
