// Gated DeltaNet chunked pipeline on the GPU vs the CPU reference: each stage alone (fed the CPU's
// own inputs for it, fp32 and bf16 intermediates) and the whole forward (uneven ragged batches, a
// sequence shorter than a chunk, an empty one, initial/final states, L2 norm, fp16, and a 64k-token
// sequence with slow gates where error could accumulate), each variant of its fused state/output
// kernel and of its intra kernel included. Outputs are poisoned first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>

#include "cuda/gdn_cuda_util.h"

namespace attnkit::gdn_test {
namespace {

constexpr int64_t kD = 128;

struct ChunkCase {
  int64_t B, T, H, HV;
  std::vector<int32_t> cu;  // empty: dense
  DType dt = DType::kBFloat16;
  bool l2norm = false;
  bool init = true;
  float glo = -1.f, ghi = 0.f;
  bool validate_indices = false;
  bool key_last = false;  // initial / final states [N, HV, V, K], passed as transposed views
  bool in_place = false;  // also run with final_state = initial_state (needs init)
  int64_t N() const { return cu.empty() ? B : static_cast<int64_t>(cu.size()) - 1; }
};

struct Inputs {
  Buffer q, k, v, g, beta, init, cu;
};

Inputs make_inputs(const ChunkCase& c, std::mt19937_64& rng) {
  Inputs in;
  if (c.l2norm) {
    in.q = Buffer(c.dt, {c.B, c.T, c.H, kD});
    in.k = Buffer(c.dt, {c.B, c.T, c.H, kD});
    testkit::fill_normal(in.q, rng);
    testkit::fill_normal(in.k, rng);
  } else {
    in.q = unit_rows(c.dt, {c.B, c.T, c.H, kD}, rng);
    in.k = unit_rows(c.dt, {c.B, c.T, c.H, kD}, rng);
  }
  in.v = Buffer(c.dt, {c.B, c.T, c.HV, kD});
  testkit::fill_normal(in.v, rng);
  in.g = random_gates({c.B, c.T, c.HV}, rng, c.glo, c.ghi);
  in.beta = Buffer(DType::kFloat32, {c.B, c.T, c.HV});
  testkit::fill_uniform(in.beta, rng, 0.05f, 1.f);
  if (c.init) {
    in.init = Buffer(DType::kFloat32, {c.N(), c.HV, kD, kD});
    testkit::fill_normal(in.init, rng, 0.f, 0.3f);
  }
  if (!c.cu.empty()) in.cu = cu_buffer(c.cu);
  return in;
}

Inputs to_device(const Inputs& h) {
  Inputs d{dev(h.q), dev(h.k), dev(h.v), dev(h.g), dev(h.beta)};
  if (!h.init.empty()) d.init = dev(h.init);
  if (!h.cu.empty()) d.cu = dev(h.cu);
  return d;
}

TensorView opt(const Buffer& b) { return b.empty() ? TensorView{} : b.view(); }

// A [N, HV, K, V] state buffer as attnkit sees it: itself, or (key_last) the [N, HV, K, V] view of
// the [N, HV, V, K] layout it holds.
TensorView state_view(const Buffer& b, bool key_last) {
  if (b.empty() || !key_last) return opt(b);
  const TensorView v = b.view();
  return make_view(b.data(), DType::kFloat32, {v.shape[0], v.shape[1], kD, kD},
                   {v.stride[0], v.stride[1], 1, kD}, b.device());
}

GdnKernels so_variant(int cols, int cluster) {
  GdnKernels k;
  k.state_output_cols = cols;
  k.state_output_cluster = cluster;
  return k;
}
GdnKernels intra_mma_sync_kernels() {
  GdnKernels k;
  k.mma_sync_intra = true;
  return k;
}

void run_forward(const ChunkCase& c, uint64_t seed, const GdnKernels& kernels = {}) {
  std::mt19937_64 rng(seed);
  const Inputs h = make_inputs(c, rng);
  auto args = [&](const Inputs& in, const Buffer& o, const Buffer& fin) {
    GdnChunkArgs a;
    a.q = in.q.view();
    a.k = in.k.view();
    a.v = in.v.view();
    a.g = in.g.view();
    a.beta = in.beta.view();
    a.cu_seqlens = opt(in.cu);
    a.initial_state = state_view(in.init, c.key_last);
    a.final_state = state_view(fin, c.key_last);
    a.o = o.view();
    a.use_qk_l2norm = c.l2norm;
    return a;
  };
  Buffer ref_o(c.dt, {c.B, c.T, c.HV, kD}), ref_fin(DType::kFloat32, {c.N(), c.HV, kD, kD});
  ExecOptions co;
  co.backend = Backend::kCPU;
  Status st = gdn_chunk_forward(args(h, ref_o, ref_fin), co);
  ASSERT_TRUE(st.ok()) << st.message();

  const Inputs d = to_device(h);
  Buffer o = poisoned(c.dt, {c.B, c.T, c.HV, kD}), fin = poisoned(DType::kFloat32, {c.N(), c.HV, kD, kD});
  ExecOptions go;
  go.validate_device_indices = c.validate_indices;
  st = chunk_forward_with(args(d, o, fin), kernels, go);
  ASSERT_TRUE(st.ok()) << st.message();
  testkit::cuda_synchronize();
  expect_close(o, ref_o, "o");
  expect_close(fin, ref_fin, "final_state");
  if (!c.in_place) return;
  // final_state = initial_state, the same view: the states are updated in place (gdn.h).
  Buffer states = dev(h.init);
  Buffer o2 = poisoned(c.dt, {c.B, c.T, c.HV, kD});
  GdnChunkArgs a = args(d, o2, fin);
  a.initial_state = a.final_state = state_view(states, c.key_last);
  st = chunk_forward_with(a, kernels, go);
  ASSERT_TRUE(st.ok()) << st.message();
  testkit::cuda_synchronize();
  expect_close(o2, ref_o, "o (in place)");
  expect_close(states, ref_fin, "final_state (in place)");
}

// States in a pool (state_indices, as engines keep them), updated in place: sequence n reads and
// writes pool row slots[n], -1 starts from zeros and writes nothing, rows no sequence names stay
// bit-identical. Key-last pools through the transposed view; the sm90 and the mma.sync kernels.
void run_pooled(const ChunkCase& c, const std::vector<int32_t>& slots, int64_t pool_rows,
                uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Inputs h = make_inputs(c, rng);
  Buffer pool(DType::kFloat32, {pool_rows, c.HV, kD, kD});
  testkit::fill_normal(pool, rng, 0.f, 0.3f);
  Buffer idx(DType::kInt32, {c.N()});
  idx.from_int(slots);
  auto args = [&](const Inputs& in, const Buffer& o, const Buffer& states, const Buffer& ix) {
    GdnChunkArgs a;
    a.q = in.q.view();
    a.k = in.k.view();
    a.v = in.v.view();
    a.g = in.g.view();
    a.beta = in.beta.view();
    a.cu_seqlens = opt(in.cu);
    a.initial_state = a.final_state = state_view(states, c.key_last);
    a.state_indices = ix.view();
    a.o = o.view();
    a.use_qk_l2norm = c.l2norm;
    return a;
  };
  Buffer ref_o(c.dt, {c.B, c.T, c.HV, kD}), ref_pool = pool.to(cpu());
  ExecOptions co;
  co.backend = Backend::kCPU;
  Status st = gdn_chunk_forward(args(h, ref_o, ref_pool, idx), co);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<float> pool0 = pool.to_float();

  const Inputs d = to_device(h);
  const Buffer didx = dev(idx);
  const NamedKernels kernels[] = {{"default kernels", {}}, {"mma.sync", mma_sync_kernels()}};
  for (const auto& [name, choice] : kernels) {
    SCOPED_TRACE(name);
    Buffer o = poisoned(c.dt, {c.B, c.T, c.HV, kD}), states = dev(pool);
    st = chunk_forward_with(args(d, o, states, didx), choice);
    ASSERT_TRUE(st.ok()) << st.message();
    testkit::cuda_synchronize();
    expect_close(o, ref_o, "o");
    expect_close(states, ref_pool, "pool");
    const std::vector<float> got = states.to_float();
    const int64_t per = c.HV * kD * kD;
    for (int64_t r = 0; r < pool_rows; ++r) {
      if (std::find(slots.begin(), slots.end(), r) != slots.end()) continue;
      EXPECT_EQ(std::memcmp(&got[r * per], &pool0[r * per], per * sizeof(float)), 0)
          << "pool row " << r << " (no sequence's) changed";
    }
  }
}

TEST(GdnChunkCuda, ForwardStatePoolInPlace) {
  run_pooled({1, 300, 2, 4, {0, 100, 164, 300}, DType::kBFloat16, false, true}, {6, -1, 2}, 8, 61);
}
TEST(GdnChunkCuda, ForwardStatePoolKeyLast) {
  ChunkCase c{2, 130, 1, 2, {}, DType::kFloat16, true, true};
  c.key_last = true;
  run_pooled(c, {0, 3}, 5, 62);
}

TEST(GdnChunkCuda, ForwardDenseUnevenLength) {
  run_forward({2, 200, 2, 4, {}, DType::kBFloat16, false, true}, 1);
}
TEST(GdnChunkCuda, ForwardRaggedL2Norm) {
  // lengths 37, 0, 263, 1, 179: shorter than a chunk, empty, one token, partial last chunks
  run_forward({1, 480, 2, 4, {0, 37, 37, 300, 301, 480}, DType::kBFloat16, true, true}, 2);
}
TEST(GdnChunkCuda, ForwardRaggedValidatedIndicesNoInitialState) {
  ChunkCase c{1, 333, 1, 2, {0, 64, 65, 333}, DType::kBFloat16, false, false};
  c.validate_indices = true;
  run_forward(c, 3);
}
TEST(GdnChunkCuda, ForwardFinalStateInPlace) {
  ChunkCase c{1, 480, 2, 4, {0, 37, 37, 300, 301, 480}, DType::kBFloat16, false, true};
  c.in_place = true;
  run_forward(c, 5);
  c.key_last = true;
  run_forward(c, 6);
}
TEST(GdnChunkCuda, ForwardFp16) {
  run_forward({1, 130, 2, 2, {}, DType::kFloat16, true, true}, 4);
}
// The forward's fused state/output kernel comes in variants (on sm_90: WGMMA with 32 value columns
// per CTA in clusters of one or two CTAs, or 64 columns in clusters of two; elsewhere, or with
// GdnKernels::mma_sync: mma.sync); the library picks one, GdnKernels forces each here, on the
// ragged case with its empty and one-token sequences.
TEST(GdnChunkCuda, ForwardEachFusedKernelVariant) {
  const ChunkCase cases[] = {{1, 480, 2, 4, {0, 37, 37, 300, 301, 480}, DType::kBFloat16, false, true},
                             {1, 130, 2, 2, {}, DType::kFloat16, true, true}};
  const NamedKernels variants[] = {{"32 columns, cluster 1", so_variant(32, 1)},
                                   {"32 columns, cluster 2", so_variant(32, 2)},
                                   {"64 columns", so_variant(64, 0)},
                                   {"mma.sync", mma_sync_kernels()}};
  uint64_t seed = 6;
  for (const ChunkCase& c : cases) {
    for (const auto& [name, kernels] : variants) {
      SCOPED_TRACE(std::string(c.dt == DType::kFloat16 ? "fp16 " : "bf16 ") + name);
      run_forward(c, seed, kernels);
    }
    ++seed;
  }
}
// The forward's intra stage comes in variants too (on sm_90: WGMMA + TMA, one CTA per q/k head
// walking its value heads; elsewhere, or with GdnKernels::mma_sync_intra or ::mma_sync:
// mma.sync, one CTA per value head). Each against the CPU reference on
// ragged chunks (empty, one-token, partial), three value heads per q/k head (the V tiles' double
// buffer reused), and fp16 with L2 norm.
TEST(GdnChunkCuda, ForwardEachIntraKernelVariant) {
  const ChunkCase cases[] = {
      {1, 480, 2, 4, {0, 37, 37, 300, 301, 480}, DType::kBFloat16, false, true},
      {2, 200, 1, 3, {}, DType::kBFloat16, false, true},
      {1, 130, 2, 2, {}, DType::kFloat16, true, true}};
  const NamedKernels variants[] = {{"default", {}},
                                   {"mma.sync intra", intra_mma_sync_kernels()},
                                   {"mma.sync", mma_sync_kernels()}};
  uint64_t seed = 20;
  for (const ChunkCase& c : cases) {
    for (const auto& [name, kernels] : variants) {
      SCOPED_TRACE(std::string("H=") + std::to_string(c.H) + " HV=" + std::to_string(c.HV) + " " +
                   name);
      run_forward(c, seed, kernels);
    }
    ++seed;
  }
}
// Initial and final states in the key-last layout of vLLM, SGLang and FlashInfer ([N, HV, V, K],
// passed transposed), through every fused state/output kernel variant, against the CPU reference
// on the same layout.
TEST(GdnChunkCuda, ForwardKeyLastStatesEachFusedKernelVariant) {
  ChunkCase c{1, 480, 2, 4, {0, 37, 37, 300, 301, 480}, DType::kBFloat16, true, true};
  c.key_last = true;
  const NamedKernels variants[] = {{"default", {}},
                                   {"32 columns, cluster 2", so_variant(32, 2)},
                                   {"64 columns", so_variant(64, 0)},
                                   {"mma.sync", mma_sync_kernels()}};
  for (const auto& [name, kernels] : variants) {
    SCOPED_TRACE(name);
    run_forward(c, 41, kernels);
  }
}
// The chain split into segments run in parallel (GdnKernels::segments, gdn_split.cu): each
// segment's affine state transfer, a scan, and the segments from their entry states. Dense and
// ragged (an empty and a one-token sequence among them), initial states in place, key-last
// states, segment counts above the chunk count.
GdnKernels segments(int n) {
  GdnKernels k;
  k.segments = n;
  return k;
}
TEST(GdnChunkCuda, ForwardSplitIntoSegments) {
  uint64_t seed = 70;
  for (int n : {2, 5, 64}) {
    SCOPED_TRACE("segments " + std::to_string(n));
    run_forward({1, 1000, 1, 2, {}, DType::kBFloat16, true, true}, ++seed, segments(n));
    run_forward({1, 480, 2, 4, {0, 37, 37, 300, 301, 480}, DType::kBFloat16, false, true}, ++seed,
                segments(n));
    ChunkCase c{1, 700, 1, 2, {0, 200, 700}, DType::kFloat16, true, true};
    c.key_last = true;
    c.in_place = true;
    run_forward(c, ++seed, segments(n));
  }
}
// Error must not accumulate over 1024 chunk steps, in the narrow and the wide state/output kernel.
TEST(GdnChunkCuda, ForwardLongSequenceSlowGates) {
  ChunkCase c{1, 65536, 1, 1, {}, DType::kBFloat16, true, true};
  c.glo = -0.01f;
  c.ghi = 0.f;
  run_forward(c, 5);
  SCOPED_TRACE("64 columns");
  run_forward(c, 5, so_variant(64, 0));
}

// Each stage alone on the CPU chain's inputs.
void run_stages(const ChunkCase& c, DType inter, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Inputs h = make_inputs(c, rng);
  const Inputs d = to_device(h);
  const int64_t C = count_chunks(c.B, c.T, c.cu);
  ExecOptions co;
  co.backend = Backend::kCPU;
  const std::vector<int64_t> tok3 = {c.B, c.T, c.HV}, tokA = {c.B, c.T, c.HV, 64},
                             tokV = {c.B, c.T, c.HV, kD}, hs = {C, c.HV, kD, kD},
                             st = {c.N(), c.HV, kD, kD};

  // 1. cumsum
  Buffer gc(DType::kFloat32, tok3);
  ASSERT_TRUE(gdn_chunk_cumsum({h.g.view(), opt(h.cu), gc.view()}, co).ok());
  {
    Buffer out = poisoned(DType::kFloat32, tok3);
    Status s = gdn_chunk_cumsum({d.g.view(), opt(d.cu), out.view()});
    ASSERT_TRUE(s.ok()) << s.message();
    testkit::cuda_synchronize();
    expect_close(out, gc, "g_cum");
  }
  const Buffer dgc = dev(gc);
  // 2. kkt + inverse
  Buffer ainv(inter, tokA);
  ASSERT_TRUE(gdn_kkt_inverse({h.k.view(), h.beta.view(), gc.view(), opt(h.cu), ainv.view()}, co).ok());
  {
    Buffer out = poisoned(inter, tokA);
    Status s = gdn_kkt_inverse({d.k.view(), d.beta.view(), dgc.view(), opt(d.cu), out.view()});
    ASSERT_TRUE(s.ok()) << s.message();
    testkit::cuda_synchronize();
    expect_close(out, ainv, "a_inv");
  }
  // 3. W, U
  Buffer w(inter, tokV), u(inter, tokV);
  ASSERT_TRUE(gdn_wu({h.k.view(), h.v.view(), h.beta.view(), gc.view(), ainv.view(), opt(h.cu),
                      w.view(), u.view()}, co).ok());
  {
    const Buffer da = dev(ainv);
    Buffer ow = poisoned(inter, tokV), ou = poisoned(inter, tokV);
    Status s = gdn_wu({d.k.view(), d.v.view(), d.beta.view(), dgc.view(), da.view(), opt(d.cu),
                       ow.view(), ou.view()});
    ASSERT_TRUE(s.ok()) << s.message();
    testkit::cuda_synchronize();
    expect_close(ow, w, "w");
    expect_close(ou, u, "u");
  }
  // 4. state pass
  Buffer hh(inter, hs), vn(inter, tokV), fin(DType::kFloat32, st);
  {
    GdnStateArgs a{h.k.view(), w.view(), u.view(), gc.view(), opt(h.cu), opt(h.init), hh.view(),
                   vn.view(), fin.view()};
    ASSERT_TRUE(gdn_state_pass(a, co).ok());
    const Buffer dw = dev(w), du = dev(u);
    Buffer oh = poisoned(inter, hs), ov = poisoned(inter, tokV), of = poisoned(DType::kFloat32, st);
    GdnStateArgs b{d.k.view(), dw.view(), du.view(), dgc.view(), opt(d.cu), opt(d.init), oh.view(),
                   ov.view(), of.view()};
    Status s = gdn_state_pass(b);
    ASSERT_TRUE(s.ok()) << s.message();
    testkit::cuda_synchronize();
    expect_close(oh, hh, "h");
    expect_close(ov, vn, "v_new");
    expect_close(of, fin, "final_state");
  }
  // 5. output
  {
    Buffer o(c.dt, tokV);
    GdnOutputArgs a{h.q.view(), h.k.view(), vn.view(), hh.view(), gc.view(), opt(h.cu), o.view()};
    ASSERT_TRUE(gdn_chunk_output(a, co).ok());
    const Buffer dv = dev(vn), dh = dev(hh);
    Buffer oo = poisoned(c.dt, tokV);
    GdnOutputArgs b{d.q.view(), d.k.view(), dv.view(), dh.view(), dgc.view(), opt(d.cu), oo.view()};
    Status s = gdn_chunk_output(b);
    ASSERT_TRUE(s.ok()) << s.message();
    testkit::cuda_synchronize();
    expect_close(oo, o, "o");
  }
}

TEST(GdnChunkCuda, StagesRaggedFp32Intermediates) {
  run_stages({1, 411, 2, 4, {0, 100, 101, 101, 350, 411}}, DType::kFloat32, 31);
}
TEST(GdnChunkCuda, StagesDenseBf16Intermediates) {
  run_stages({2, 150, 1, 2, {}}, DType::kBFloat16, 32);
}
TEST(GdnChunkCuda, StagesGroupOfThreeValueHeads) {
  // The chunk output serves a q/k head's value heads in turn through two buffers: a third head
  // reuses the first one's.
  run_stages({2, 190, 1, 3, {}}, DType::kBFloat16, 34);
}
TEST(GdnChunkCuda, StagesFp16Inputs) {
  ChunkCase c{1, 96, 2, 2, {}};
  c.dt = DType::kFloat16;
  run_stages(c, DType::kFloat32, 33);
}

}  // namespace
}  // namespace attnkit::gdn_test
