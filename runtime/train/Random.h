//===- Random.h - a small reproducible random number generator --*- C++ -*-===//
//
// splitmix64: the same numbers on every platform and standard library
// (unlike the distributions of <random>, whose outputs are implementation-
// defined), for parameter initialisation, tests and fuzz mutations.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_RANDOM_H
#define PARTITION_RUNTIME_RANDOM_H

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace partition::runtime {

struct SplitMix64 {
  uint64_t state;

  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1].
  double uniform() { return double((next() >> 11) + 1) * 0x1.0p-53; }
  /// Standard normal (Box-Muller, one of the pair).
  double normal() {
    return std::sqrt(-2.0 * std::log(uniform())) *
           std::cos(2.0 * M_PI * uniform());
  }
  /// Uniform in [0, n); 0 when n is 0.
  size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
};

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_RANDOM_H
