// Host-side description of one Hopper prefill launch: plain pointers, extents and strides (elements),
// no CuTe types, so the dispatcher can fill it without including the kernel. The launcher turns the
// Q/K/V parts into TMA descriptors.
#pragma once

#include <cstdint>

namespace attnkit::gpu {

struct Sm90FwdArgs {
  const void* q = nullptr;  // [B, Sq, Hq, D]
  const void* k = nullptr;  // [B, Sk, Hkv, D]
  const void* v = nullptr;  // [B, Sk, Hkv, D]
  void* o = nullptr;        // [B, Sq, Hq, D]
  float* lse = nullptr;     // [B, Sq, Hq] (any strides), optional
  int64_t q_batch = 0, q_row = 0, q_head = 0;
  int64_t k_batch = 0, k_row = 0, k_head = 0;
  int64_t v_batch = 0, v_row = 0, v_head = 0;
  int64_t o_batch = 0, o_row = 0, o_head = 0;
  int64_t lse_batch = 0, lse_row = 0, lse_head = 0;
  int batch = 0, sq = 0, sk = 0, hq = 0, hkv = 0;
  float scale = 0.f;
  bool pingpong = true;  // consumer warpgroups take turns issuing GEMMs (named barriers)
  bool persistent = false;  // causal d128: persistent grid instead of one CTA per tile
};

}  // namespace attnkit::gpu
