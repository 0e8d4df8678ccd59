//===- ActivationMemory.h - per-layer activation and TP traffic -*- C++ -*-===//
//
// What each transformer layer of a (partitioned) training step keeps alive
// from its forward pass for its backward pass, per rank, and what it sends
// over the tensor-parallel axis, read off the IR:
//
//  - a saved activation is a value computed without any gradient that a
//    gradient computation (downstream of the loss gradient or, in a
//    pipeline stage's function, of the gradients it receives) reads (an all_gather or all_slice that only the
//    backward reads is a recomputation: its source is what is kept); it
//    belongs to the layer of the backward op that reads it, the layer of an
//    op being that of the parameters it reads (`h.<l>.` or `layers.<l>.`;
//    none for the embeddings, final norm and LM head), else inherited (see
//    ActivationMemory.cpp). Bytes are counted at 16 bits
//    per element, the convention of Korthikanti et al. 2022 ("Reducing
//    Activation Recomputation in Large Transformer Models");
//  - tensor-parallel traffic is what each rank sends per step in the
//    collectives over the plan's tensor axis (the mesh axis #dist.plan gives
//    role tensor; none without a plan) that complete the layer's ops
//    (reductions) or feed them (gathers): a ring all-reduce of S
//    bytes over N ranks sends 2(N-1)/N S, an all-gather (N-1)/N of its
//    output, a reduce-scatter (N-1)/N of its input (at the tensors' own
//    element size).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_ANALYSIS_ACTIVATIONMEMORY_H
#define PARTITION_PASSES_ANALYSIS_ACTIVATIONMEMORY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <map>

namespace partition {

struct LayerMemory {
  /// Bytes saved for the backward pass, at 16 bits per element.
  int64_t activationBytes = 0;
  /// Bytes this rank sends per step in tensor-parallel collectives.
  int64_t tensorParallelBytes = 0;
};

/// Per layer index, for a training step (partitioned or not).
std::map<int64_t, LayerMemory> analyzeLayerMemory(mlir::func::FuncOp step);

} // namespace partition

#endif // PARTITION_PASSES_ANALYSIS_ACTIVATIONMEMORY_H
