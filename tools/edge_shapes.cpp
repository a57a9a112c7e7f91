#include "edge_shapes.h"

namespace attnkit::cli {
namespace {

AttnCase attn(int b, int64_t sq, int64_t sk, int hq, int hkv, int d) {
  AttnCase c;
  c.batch = b;
  c.seqlen_q = sq;
  c.seqlen_k = sk;
  c.heads_q = hq;
  c.heads_kv = hkv;
  c.dim_qk = c.dim_v = d;
  c.lse = true;
  return c;
}

AttnCase causal(AttnCase c) {
  c.mask = Mask::causal();
  return c;
}

AttnCase paged(AttnCase c, int page_size, std::vector<int64_t> lens = {}) {
  c.paged = true;
  c.page_size = page_size;
  c.varlen_k = std::move(lens);
  return c;
}

AttnCase varlen(AttnCase c, std::vector<int64_t> q, std::vector<int64_t> k) {
  c.varlen_q = std::move(q);
  c.varlen_k = std::move(k);
  return c;
}

GdnCase gdn(int b, int64_t t, int h, int hv) {
  GdnCase c;
  c.batch = b;
  c.seqlen = t;
  c.heads = h;
  c.heads_v = hv;
  return c;
}

}  // namespace

std::vector<EdgeCase> edge_cases() {
  std::vector<EdgeCase> out;
  auto A = [&](std::string why, AttnCase c) {
    EdgeCase e;
    e.op = OpKind::kAttention;
    e.why = std::move(why);
    e.attn = std::move(c);
    out.push_back(std::move(e));
  };

  // ---- lengths
  A("zero-length sequences (q and k), ragged", causal(varlen(attn(0, 0, 0, 4, 2, 64), {5, 0, 17, 3}, {7, 4, 0, 30})));
  A("zero-length sequences, paged", paged(varlen(attn(0, 0, 0, 4, 2, 64), {5, 0, 17, 3}, {}), 16, {7, 4, 0, 30}));
  A("Sq > Sk with causal", causal(attn(2, 40, 17, 4, 4, 128)));
  A("one token", attn(1, 1, 1, 8, 1, 128));
  A("one token, causal", causal(attn(3, 1, 1, 4, 4, 64)));
  A("prime length 1013, causal", causal(attn(1, 1013, 1013, 4, 2, 64)));
  A("prime lengths 777 x 1013", attn(1, 777, 1013, 2, 2, 128));
  A("very uneven varlen, ragged KV",
    causal(varlen(attn(0, 0, 0, 4, 2, 128), {1, 300, 2, 77, 0}, {1000, 300, 5, 77, 13})));
  {
    AttnCase c = attn(3, 1, 512, 8, 2, 128);
    c.seqused_k = {512, 3, 0};
    A("contiguous KV cache with seqused_k (one empty)", c);
  }

  // ---- page sizes
  A("page size 1, decode", paged(attn(3, 1, 0, 8, 2, 128), 1, {1, 100, 37}));
  A("page size 16, decode, uneven", paged(attn(4, 1, 0, 8, 2, 128), 16, {1000, 17, 256, 1}));
  A("page size 48, ragged prefill", paged(causal(varlen(attn(0, 0, 0, 4, 1, 128), {3, 64, 1}, {})), 48, {500, 64, 49}));
  {
    AttnCase c = paged(attn(2, 1, 777, 8, 1, 128), 256);
    c.num_splits = 3;
    A("page size 256, decode, 3 splits", c);
  }
  A("page size 64, 4 query tokens (speculative decode)", paged(causal(attn(2, 4, 0, 8, 2, 128)), 64, {300, 65}));

  // ---- heads
  A("Hq/Hkv 1/1", causal(attn(2, 64, 64, 1, 1, 64)));
  A("Hq/Hkv 4/1 (MQA)", causal(attn(2, 64, 96, 4, 1, 128)));
  A("Hq/Hkv 7/7", attn(1, 80, 80, 7, 7, 128));
  A("Hq/Hkv 7/1", causal(attn(1, 80, 80, 7, 1, 64)));
  A("Hq/Hkv 8/4", causal(attn(2, 70, 70, 8, 4, 128)));
  A("Hq/Hkv 8/8", attn(1, 70, 70, 8, 8, 64));

  // ---- head dims
  for (int d : {64, 96, 128, 192, 256}) A("head dim " + std::to_string(d), causal(attn(1, 65, 130, 2, 1, d)));
  {
    AttnCase c = causal(attn(2, 65, 130, 4, 2, 192));
    c.dim_v = 128;
    A("head dims 192/128 (q/k vs v)", c);
  }

  // ---- masks
  {
    AttnCase c = attn(2, 64, 32, 4, 2, 128);
    c.mask = Mask::sliding_window(4, 0);
    A("rows fully masked by a window (Sq > Sk)", c);
    c = attn(1, 100, 100, 4, 2, 64);
    c.mask = Mask::sliding_window(8, 8);
    A("two-sided sliding window", c);
    c = attn(1, 100, 130, 4, 4, 64);
    c.mask = Mask::chunked(16, true);
    A("chunked (16) causal", c);
    c = varlen(attn(0, 0, 0, 2, 1, 128), {33, 70}, {50, 70});
    c.mask = Mask::chunked(32, false);
    A("chunked (32) bidirectional, ragged", c);
  }

  // ---- score modifiers, sinks, scale, large logits
  {
    AttnCase c = causal(attn(1, 128, 128, 4, 2, 128));
    c.q_std = 30.f;
    A("large logits (q std 30)", c);
    c.softcap = 50.f;
    A("large logits with softcap 50", c);
    c = causal(attn(2, 96, 96, 8, 2, 64));
    c.alibi = true;
    c.sinks = true;
    A("ALiBi + sinks", c);
    c = causal(attn(2, 40, 17, 4, 2, 64));
    c.sinks = true;
    A("sinks with rows that see no key", c);
    c = attn(2, 64, 64, 4, 4, 128);
    c.scale = 0.3f;
    c.softcap = 20.f;
    A("explicit scale + softcap", c);
    c = causal(attn(2, 128, 128, 4, 2, 128));
    c.dtype = DType::kFloat16;
    c.q_std = 10.f;
    A("fp16, large logits", c);
  }

  // ---- split-KV
  {
    AttnCase c = attn(3, 1, 1013, 8, 2, 128);
    c.num_splits = 4;
    A("decode, 4 splits", c);
    c = causal(attn(1, 100, 300, 4, 2, 64));
    c.num_splits = 2;
    A("prefill, 2 splits", c);
  }

  // ---- merge_states
  auto M = [&](std::string why, int n, int64_t t, int h, int d, DType dt, bool lse) {
    EdgeCase e;
    e.op = OpKind::kMerge;
    e.why = std::move(why);
    e.merge.parts = n;
    e.merge.tokens = t;
    e.merge.heads = h;
    e.merge.dim = d;
    e.merge.dtype = dt;
    e.merge.lse = lse;
    out.push_back(std::move(e));
  };
  M("merge 3 fp32 parts, empty states", 3, 64, 8, 128, DType::kFloat32, true);
  M("merge 1 part (bf16)", 1, 17, 4, 64, DType::kBFloat16, false);
  M("merge 4 parts, d256 (bf16)", 4, 33, 2, 256, DType::kBFloat16, true);

  // ---- Gated DeltaNet
  auto G = [&](std::string why, GdnCase c, bool decode) {
    EdgeCase e;
    e.op = decode ? OpKind::kGdnDecode : OpKind::kGdn;
    e.why = std::move(why);
    e.gdn = std::move(c);
    out.push_back(std::move(e));
  };
  G("GDN one token", gdn(1, 1, 2, 4), false);
  {
    GdnCase c = gdn(2, 777, 2, 4);
    c.initial_state = true;
    G("GDN prime length 777, initial state", c, false);
    c = gdn(1, 0, 1, 2);
    c.varlen = {0, 64, 1, 130};
    c.initial_state = true;
    c.l2norm = true;
    G("GDN varlen with an empty sequence, l2norm", c, false);
    c = gdn(1, 200, 4, 4);
    c.scale = 0.5f;
    G("GDN HV = H, explicit scale", c, false);
    c = gdn(5, 1, 2, 4);
    c.pool = 9;
    G("GDN decode, scattered pool slots", c, true);
    c = gdn(1, 1, 1, 1);
    c.pool = 1;
    c.l2norm = true;
    G("GDN decode, one sequence, l2norm", c, true);
  }

  uint64_t seed = 100;
  for (auto& e : out) e.attn.seed = e.merge.seed = e.gdn.seed = seed++;
  return out;
}

}  // namespace attnkit::cli
