//===- ZeroMemory.cpp - ZeRO's per-rank model-state accounting ------------===//

#include "lowering/ZeroMemory.h"

namespace partition {

ZeroStateBytes zeroStateBytes(int64_t stage, double parameters, int64_t ranks,
                              const StateLayout16 &layout) {
  if (stage < 0 || stage > 3 || ranks < 1)
    return {};
  double n = static_cast<double>(ranks);
  // Each stage shards one more kind of state: optimizer, gradients, then
  // parameters.
  return {parameters * layout.parameterBytes / (stage >= 3 ? n : 1.0),
          parameters * layout.gradientBytes / (stage >= 2 ? n : 1.0),
          parameters * layout.optimizerBytes / (stage >= 1 ? n : 1.0)};
}

} // namespace partition
