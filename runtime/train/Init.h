//===- Init.h - deterministic parameter initialisation ----------*- C++ -*-===//

#ifndef PARTITION_RUNTIME_INIT_H
#define PARTITION_RUNTIME_INIT_H

#include <cstdint>
#include <string>
#include <vector>

namespace partition::runtime {

/// The initial values of one parameter, as GPT-2 / nanoGPT / Megatron
/// initialise them: biases 0, norm gains 1, matrices N(0, 0.02), and the
/// projections that write into the residual stream (attention output and
/// MLP down projections) N(0, 0.02 / sqrt(2 layers)).
///
/// The values depend only on (seed, name, shape), never on the order in
/// which parameters are initialised or on the partitioning, so a model
/// sharded any way starts from the same logical tensors.
std::vector<float> initialParameter(const std::string &name,
                                    const std::vector<int64_t> &shape,
                                    int64_t layers, uint64_t seed);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_INIT_H
