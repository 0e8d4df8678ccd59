//===- cub_shim.h - host stand-in for CUB's radix sort -----*- C++ -*-===//
//
// Host stand-in for cub::DeviceRadixSort::SortPairs (emulation only): a
// stable sort of (key, value) pairs by bits [beginBit, endBit) of the key,
// CUB's contract. Sizing (temp == nullptr) asks for a plausible scratch and
// the real call checks that it got it; keys with bits outside the range
// abort (CUB would silently sort by the truncated key).
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>
namespace cub {
struct DeviceRadixSort {
  template <typename K, typename V>
  static cudaError_t SortPairs(void *temp, std::size_t &bytes, const K *keysIn,
                               K *keysOut, const V *valuesIn, V *valuesOut,
                               int n, int beginBit = 0,
                               int endBit = sizeof(K) * 8,
                               cudaStream_t = nullptr) {
    const std::size_t need = std::size_t(n) * (sizeof(K) + sizeof(V)) + 4096;
    if (!temp) { bytes = need; return cudaSuccess; }
    if (bytes < need) { std::fprintf(stderr, "EMU: cub scratch too small\n"); std::abort(); }
    // Touch the scratch (ASan checks the workspace really holds it).
    static_cast<volatile char *>(temp)[0] = 0;
    static_cast<volatile char *>(temp)[need - 1] = 0;
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    const K mask = endBit >= int(sizeof(K) * 8) ? K(~K(0)) : K((K(1) << endBit) - 1);
    for (int i = 0; i < n; ++i)
      if ((keysIn[i] & ~mask) != 0) { std::fprintf(stderr, "EMU: key %lu has bits past endBit %d\n", (unsigned long)keysIn[i], endBit); std::abort(); }
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
      return ((keysIn[a] & mask) >> beginBit) < ((keysIn[b] & mask) >> beginBit);
    });
    std::vector<K> k(n); std::vector<V> v(n);
    for (int i = 0; i < n; ++i) { k[i] = keysIn[idx[i]]; v[i] = valuesIn[idx[i]]; }
    std::copy(k.begin(), k.end(), keysOut);
    std::copy(v.begin(), v.end(), valuesOut);
    return cudaSuccess;
  }
};
} // namespace cub
