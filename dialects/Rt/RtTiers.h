//===- RtTiers.h - buffers outside the arena --------------------*- C++ -*-===//
//
// The offload (docs/offload.md) keeps some state buffers in a tier of their
// own, host memory or a file on NVMe, marked `rt.tier`: before the memory
// plan the function's argument carries it, after it the view of the
// function's tier argument does (and the argument itself). Kernels and
// collectives run on the arena only; rt.tier_read / rt.tier_write move a
// tier's bytes through staging buffers of the arena.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_RT_RTTIERS_H
#define PARTITION_DIALECTS_RT_RTTIERS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace partition::rt {

/// The tiers a buffer may live in besides the arena.
inline bool isTierName(llvm::StringRef tier) {
  return tier == "host" || tier == "nvme";
}

/// The tier (host or nvme) of the buffer `value` views, or nullopt for a
/// buffer of the arena.
std::optional<llvm::StringRef> tierOf(mlir::Value value);

/// A started (`async`) op's token is completed by exactly one rt.wait
/// (collectives and tier transfers alike; RtOps.cpp). Succeeds for a null
/// token.
mlir::LogicalResult verifyAsyncToken(mlir::Operation *op, mlir::Value token);

/// Fails, naming the operand and what to do, when an operand of `op` (a
/// kernel, a collective, a send or a receive) lives in a tier.
mlir::LogicalResult verifyInArena(mlir::Operation *op);

} // namespace partition::rt

#endif // PARTITION_DIALECTS_RT_RTTIERS_H
