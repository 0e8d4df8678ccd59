//===- CommunicationCount.h - bytes a rank sends per step -------*- C++ -*-===//
//
// The communication lines of the memory report (--memory-report): what each
// rank sends in one run of a function, by collective and by group of mesh
// axes, as ring algorithms move it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_COMMUNICATIONCOUNT_H
#define PARTITION_LOWERING_COMMUNICATIONCOUNT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace partition {

/// Bytes per group of axes ("dp=2", "dp=2,tp=2"), in order of first use.
using BytesByGroup = llvm::SmallVector<std::pair<std::string, int64_t>>;

/// The bytes one rank sends in the collectives of one function.
struct Communication {
  llvm::StringRef function;
  int64_t sentBytes = 0;
  unsigned buckets = 0, gathers = 0, scatters = 0, shifts = 0, moves = 0,
           sends = 0;
  /// All-reduce: the bytes reduced; all-gather: the bytes of its output;
  /// reduce-scatter: the bytes of its input; ring shift: the bytes each
  /// rank passes on; all-to-all: the bytes of its input (1 / N of them
  /// stay on the rank).
  BytesByGroup reducedBytes, gatheredBytes, scatteredBytes, shiftedBytes,
      movedBytes;
  /// rt.send: the bytes sent, by peer ("pp=1").
  BytesByGroup sentBytesByPeer;
};

/// Counts the collectives and sends of `function` (rt dialect), or emits an
/// error and fails when a count overflows 64 bits or names an unknown axis.
mlir::FailureOr<Communication> countCommunication(mlir::func::FuncOp function);

/// One line per function, for instance
///   communication: train_step sends 1536 bytes per rank per step (2
///   all-reduce buckets, 1536 bytes reduced over dp=2; 1 all-gather, 512
///   bytes gathered over tp=2)
void printCommunication(const Communication &comm, llvm::raw_ostream &os);

} // namespace partition

#endif // PARTITION_LOWERING_COMMUNICATIONCOUNT_H
