// Helpers shared by the sm90 prefill tests: the Hopper check that skips them elsewhere, the
// options that force the sm90 backend, the base case they vary, and the NaN fill of unused K/V rows
// (contiguous / ragged and paged).
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu_attention_util.h"

namespace attnkit::test {

inline bool on_hopper() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
    return false;
  return major == 9;
}

#define SKIP_UNLESS_HOPPER() \
  if (!::attnkit::test::on_hopper()) GTEST_SKIP() << "the sm90 kernels need a Hopper GPU"

inline ExecOptions sm90_opts() {
  ExecOptions o;
  o.backend = Backend::kCudaSm90;
  return o;
}

// bf16 (AttnCase's default), 4 query heads over 2 KV heads, head dim 128, one split: the feature
// tests check the unsplit kernel by the name it runs under; split-KV, asked for and automatic, is
// sm90_split_test.cpp's (the automatic count would split many of these small grids).
inline AttnCase sm90_base(int batch, int sq, int sk, uint64_t seed) {
  AttnCase c = gqa_case(batch, sq, sk, seed);
  c.num_splits = 1;
  return c;
}

// Overwrites every K/V row a sequence does not use (cache slots past seqused_k, packed rows past
// cu_seqlens_k[B]) with NaN: the reference never reads them, and neither may the kernel (in P·V,
// 0 x NaN is NaN).
inline void poison_unused_kv(AttnData& d) {
  const AttnCase& c = d.c;
  for (ViewedBuffer* t : {&d.k, &d.v}) {
    const TensorView& v = t->view;
    const int64_t dim = v.shape[v.ndim - 1];
    auto poison_row = [&](int64_t off) {
      std::memset(static_cast<char*>(t->buf.data()) + off * 2, 0xFF, static_cast<size_t>(dim) * 2);
    };
    if (c.kv == KvKind::kSeqused) {
      for (int b = 0; b < c.batch(); ++b)
        for (int64_t r = c.seqlens_k[b]; r < v.shape[1]; ++r)
          for (int64_t h = 0; h < v.shape[2]; ++h)
            poison_row(b * v.stride[0] + r * v.stride[1] + h * v.stride[2]);
    } else if (c.kv == KvKind::kRagged) {
      int64_t used = 0;
      for (int s : c.seqlens_k) used += s;
      for (int64_t r = used; r < v.shape[0]; ++r)
        for (int64_t h = 0; h < v.shape[1]; ++h) poison_row(r * v.stride[0] + h * v.stride[1]);
    }
  }
}

// NaN in every (page, row) slot of the cache that holds no used key of any sequence.
inline void poison_unused_slots(AttnData& d) {
  const AttnCase& c = d.c;
  const std::vector<int32_t> table = d.page_table.buf.to_int();
  const int64_t max_pages = d.page_table.view.shape[1];
  const int64_t num_pages = d.k.view.shape[0], ps = d.k.view.shape[1];
  std::vector<char> used(static_cast<size_t>(num_pages * ps), 0);
  for (int b = 0; b < c.batch(); ++b)
    for (int j = 0; j < c.seqlens_k[b]; ++j)
      used[static_cast<size_t>(table[b * max_pages + j / ps] * ps + j % ps)] = 1;
  for (ViewedBuffer* t : {&d.k, &d.v}) {
    const TensorView& v = t->view;
    const int64_t dim = v.shape[3];
    for (int64_t pg = 0; pg < num_pages; ++pg)
      for (int64_t r = 0; r < ps; ++r) {
        if (used[static_cast<size_t>(pg * ps + r)]) continue;
        for (int64_t h = 0; h < v.shape[2]; ++h)
          std::memset(static_cast<char*>(t->buf.data()) +
                          (pg * v.stride[0] + r * v.stride[1] + h * v.stride[2]) * 2,
                      0xFF, static_cast<size_t>(dim) * 2);
      }
  }
}

}  // namespace attnkit::test
