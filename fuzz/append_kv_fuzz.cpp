// libFuzzer target over append_kv_cache on the CPU backend: the input bytes choose the tokens,
// KV heads and head sizes, paged caches (pages x page_size) and contiguous ones (one "page" per
// sequence, [B, S, Hkv, D]), the cache layout of K and of V (NHD, or vLLM's HND
// [pages, Hkv, page_size, D] passed as its permuted view), padded strides, the dtypes (fp16 / bf16
// caches, FP8 e4m3 caches with per-tensor, per-KV-head and per-token scales, each per-token scale
// NHD or HND), and the raw contents of slot_mapping (negative, -1 padding, out of range,
// repeated), or distinct in-range slots with -1 padding. Every tensor is its own heap allocation
// of exactly the span its view claims, so AddressSanitizer reports any read or write outside it.
// The op must return a Status (any code) and never crash. Built with -DATTNKIT_BUILD_FUZZERS=ON
// (clang); run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attnkit/kv_cache.h"

#include "fuzz_input.h"

namespace {

using namespace attnkit::fuzz;

// A [pages, page_size, hkv, d] cache, NHD or (hnd) stored [pages, hkv, page_size, d] and permuted.
Owned cache(attnkit::DType dt, int64_t pages, int64_t page, int64_t hkv, int64_t d, bool hnd,
            int64_t pad, Bytes& in) {
  if (hnd) return make_perm(dt, {pages, hkv, page, d}, {0, 2, 1, 3}, pad, in);
  return make(dt, {pages, page, hkv, d}, pad, in);
}

// A scale of kind 0 (per tensor [1]), 1 (per KV head [hkv]), 2 (per token, NHD or HND like the
// cache) or 3 (a wrong shape).
Owned scale(int kind, int64_t pages, int64_t page, int64_t hkv, bool hnd, Bytes& in) {
  using attnkit::DType;
  if (kind == 0) return make(DType::kFloat32, {1}, 0, in);
  if (kind == 1) return make(DType::kFloat32, {hkv}, 0, in);
  if (kind == 2) return hnd ? make_perm(DType::kFloat32, {pages, hkv, page}, {0, 2, 1}, 0, in)
                            : make(DType::kFloat32, {pages, page, hkv}, 0, in);
  return make(DType::kFloat32, {pages, page + 1}, 0, in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnkit;
  Bytes in{data, size};
  const int tokens = in.pick(9), hkv = 1 + in.pick(2);
  static const int kDims[8] = {1, 3, 8, 16, 32, 64, 128, 0};
  const int dk = kDims[in.pick(6)], dv = in.pick(3) == 0 ? kDims[in.pick(7)] : dk;
  const DType dt =
      in.pick(7) == 7 ? DType::kFloat32 : in.pick(1) ? DType::kBFloat16 : DType::kFloat16;
  const bool fp8 = in.pick(2) == 0;
  const DType ct = fp8 ? DType::kFloat8E4M3 : in.pick(15) == 15 ? DType::kFloat32 : dt;
  const bool contiguous = in.pick(3) == 0;  // [B, S, Hkv, D]: B "pages" of S slots
  const int pages = contiguous ? 1 + in.pick(2) : (1 + in.pick(6)) % 7;  // 0 now and then
  const int page = contiguous ? 1 + in.pick(40) : 1 + in.pick(7);
  const bool k_hnd = in.pick(1), v_hnd = in.pick(3) == 0 ? !k_hnd : k_hnd;
  const int64_t pad = in.pick(1) ? 8 : 0;

  Owned k, v, slots, kc, vc, ks, vs;
  k = make(dt, {tokens, hkv, dk}, pad, in);
  v = make(dt, {tokens, hkv, dv}, in.pick(1) ? 8 : 0, in);
  kc = cache(ct, pages, page, hkv, dk, k_hnd, pad, in);
  vc = cache(ct, pages, page, hkv, dv, v_hnd, in.pick(1) ? 8 : 0, in);
  const int cap = pages * page;
  if (in.pick(2) == 2 || cap == 0) {
    slots = ints({tokens}, in);  // raw: negative, out of range, repeated
  } else {
    // In-range slots start, start + step, ... (mod cap), -1 padding now and then: distinct while
    // the tokens fit and step is coprime with cap, repeated otherwise.
    slots = make(DType::kInt32, {tokens}, 0, in);
    auto* s = reinterpret_cast<int32_t*>(slots.mem.data());
    const int start = in.pick(255), step = in.pick(3) ? 1 : 1 + in.pick(cap - 1);
    for (int t = 0; t < tokens; ++t) s[t] = in.pick(7) == 7 ? -1 : (start + t * step) % cap;
  }
  if (fp8 || in.pick(31) == 31) {
    const int kk = in.pick(7), vk = in.pick(1) ? kk : in.pick(7);
    // Mostly valid kinds (0..2), now and then a wrong shape (3) or none at all (4).
    auto kind = [](int x) { return x < 6 ? x % 3 : x == 6 ? 3 : 4; };
    if (kind(kk) != 4) ks = scale(kind(kk), pages, page, hkv, k_hnd, in);
    if (kind(vk) != 4) vs = scale(kind(vk), pages, page, hkv, v_hnd, in);
  }
  if (in.pick(31) == 31) slots = make(DType::kInt32, {tokens + 1}, 0, in);  // wrong length

  AppendKvArgs a;
  a.k = k.view;
  a.v = v.view;
  a.slot_mapping = slots.view;
  a.k_cache = kc.view;
  a.v_cache = vc.view;
  a.k_scale = ks.view;
  a.v_scale = vs.view;
  report(append_kv_cache(a, cpu_opts()));
  return 0;
}
