// Problem descriptions shared by `attnkit bench` and `attnkit check`: a plain description of one op
// call (shapes, layout, options), the owning buffers that realise it with random inputs, and the
// argument structs that point into them. Also the work counts the benchmark divides by.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "api/gdn_backends.h"
#include "attnkit/attnkit.h"
#include "testkit/buffer.h"

namespace attnkit::cli {

// kExact: every element drawn (tests); kFast: a random block tiled over large tensors, so that
// multi-GB benchmark inputs are made in seconds (values are random, never zeros).
enum class Fill { kExact, kFast };

// ---------------------------------------------------------------- softmax attention
struct AttnCase {
  std::string op = "attention";  // table label: "attention" (prefill) or "decode"
  int batch = 2;
  int64_t seqlen_q = 128, seqlen_k = 128;
  std::vector<int64_t> varlen_q;   // non-empty: ragged Q with these lengths (batch = its size)
  std::vector<int64_t> varlen_k;   // non-empty: ragged KV, or with `paged` the keys per sequence
  std::vector<int64_t> seqused_k;  // non-empty: contiguous KV of seqlen_k rows, these many used
  int heads_q = 8, heads_kv = 8, dim_qk = 128, dim_v = 128;
  DType dtype = DType::kBFloat16;
  Mask mask{};
  float softcap = 0.f, scale = 0.f;
  bool alibi = false, sinks = false, paged = false, lse = false;
  int page_size = 16;
  int num_splits = 0;
  // Non-empty: an FP8 (e4m3) KV cache with scales "tensor" ([1]), "head" ([Hkv]), "token" (K's
  // shape without its last dim) or "batch-head" ([B, Hkv]).
  std::string kv_fp8;
  // Non-empty: FP8 attention, e4m3 Q with q_scale of that kind ([Hq] per head), O in `dtype`;
  // needs kv_fp8.
  std::string q_fp8;
  float q_std = 1.f;  // > 1 gives large logits
  uint64_t seed = 1;

  int num_seqs() const;
  int64_t len_q(int b) const;
  int64_t len_k(int b) const;
  int64_t total_q() const;
  // Short label for tables, e.g. "b4 s4096 h16/16 d128 causal bf16".
  std::string describe() const;
  // Query-key pairs the mask leaves visible, summed over sequences (per head).
  int64_t visible_pairs() const;
  // 2·pairs·(Dqk + Dv) per query head (= 4·pairs·D when Dqk = Dv).
  double flops() const;
  // Bytes of K and V read (each used key once per KV head), per-token FP8 scales included.
  double kv_bytes() const;
  DType kv_dtype() const { return kv_fp8.empty() ? dtype : DType::kFloat8E4M3; }
  // Command-line level consistency (list lengths, positive sizes); the library checks the rest.
  Status check() const;
};

struct AttnTensors {
  testkit::Buffer q, k, v, cu_q, cu_k, page_table, seqused_k, alibi, sinks, q_scale, k_scale, v_scale;
  testkit::Buffer o, lse;
  AttentionArgs args(const AttnCase& c) const;
  void poison_outputs();
  size_t input_bytes() const;
};

Status make_attention(const AttnCase& c, Device dev, Fill fill, std::mt19937_64& rng,
                      AttnTensors* t);
// The same inputs on another device, with freshly allocated (unpoisoned) outputs.
AttnTensors copy_attention(const AttnTensors& src, Device dev);

// ---------------------------------------------------------------- append_kv_cache
struct AppendCase {
  int64_t tokens = 37, pages = 8;
  int page_size = 16, heads_kv = 4, dim_k = 128, dim_v = 128;
  DType dtype = DType::kBFloat16;  // of the new k / v, and of the caches unless cache_fp8 is set
  std::string cache_fp8;           // "", "tensor", "head" or "token": e4m3 caches, scales of that kind
  bool hnd = false;                // caches stored [pages, Hkv, page, D], passed as NHD views
  uint64_t seed = 1;

  std::string describe() const;
  Status check() const;
};

// New tokens with a shuffled slot mapping (every fifth slot -1, padding), caches and scales filled
// with old values the op must keep where no slot names them.
struct AppendTensors {
  testkit::Buffer k, v, slots, k_cache, v_cache, k_scale, v_scale;
  AppendKvArgs args(const AppendCase& c) const;
};

Status make_append(const AppendCase& c, Device dev, std::mt19937_64& rng, AppendTensors* t);
AppendTensors copy_append(const AppendTensors& src, Device dev);

// ---------------------------------------------------------------- merge_states
struct MergeCase {
  int parts = 3;
  int64_t tokens = 64;
  int heads = 8, dim = 128;
  DType dtype = DType::kFloat32;  // of o_parts and o
  bool lse = true;
  uint64_t seed = 1;
  std::string describe() const;
};

struct MergeTensors {
  testkit::Buffer o_parts, lse_parts, o, lse;
  MergeStatesArgs args() const;
  void poison_outputs();
};

// Some partial LSEs are -inf (empty states), and one token has every part empty.
Status make_merge(const MergeCase& c, Device dev, std::mt19937_64& rng, MergeTensors* t);
MergeTensors copy_merge(const MergeTensors& src, Device dev);

// ---------------------------------------------------------------- Gated DeltaNet
struct GdnCase {
  int batch = 1;
  int64_t seqlen = 256;
  std::vector<int64_t> varlen;  // non-empty: ragged tokens (B = 1, N = its size)
  int heads = 4, heads_v = 8, dim_k = 128, dim_v = 128;
  DType dtype = DType::kBFloat16;
  bool initial_state = false, final_state = true, l2norm = false;
  float scale = 0.f;
  int pool = 0;  // decode: state-pool slots (0 = 2·batch)
  uint64_t seed = 1;

  int num_seqs() const;  // N
  int64_t total_tokens() const;
  int pool_slots() const { return pool > 0 ? pool : 2 * batch; }
  std::string describe(bool decode) const;
  // The chunked algorithm's FLOPs, estimated as bench/anchors_gdn.py does for fla (64-token chunks).
  double flops() const;
  // Decode: state bytes read and written.
  double decode_state_bytes() const;
  Status check(bool decode) const;
};

struct GdnTensors {
  testkit::Buffer q, k, v, g, beta, cu, h0, ht, o;
  GdnChunkArgs args(const GdnCase& c) const;
  void poison_outputs();
};

struct GdnDecodeTensors {
  testkit::Buffer q, k, v, g, beta, pool, idx, o;
  GdnDecodeArgs args(const GdnCase& c) const;
  void poison_outputs();
};

// q and k come L2-normalised per head unless the case asks the op to normalise (l2norm), as
// the delta rule is only stable for unit-norm keys; g = log(sigmoid(x)) <= 0; beta in (0, 1).
Status make_gdn(const GdnCase& c, Device dev, Fill fill, std::mt19937_64& rng, GdnTensors* t);
GdnTensors copy_gdn(const GdnTensors& src, Device dev);
Status make_gdn_decode(const GdnCase& c, Device dev, Fill fill, std::mt19937_64& rng,
                       GdnDecodeTensors* t);
GdnDecodeTensors copy_gdn_decode(const GdnDecodeTensors& src, Device dev);

// ---------------------------------------------------------------- helpers
bool parse_dtype(const std::string& s, DType* out);
bool parse_backend(const std::string& s, Backend* out);

// --gdn-kernels: a comma list of mma-sync, mma-sync-intra, decode-ring, cols32 | cols64,
// cluster1 | cluster2, segments<n> into the Gated DeltaNet kernel choice (detail::GdnKernels).
Status parse_gdn_kernels(const std::string& list, detail::GdnKernels* k);

}  // namespace attnkit::cli
