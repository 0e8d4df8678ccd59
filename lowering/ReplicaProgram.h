//===- ReplicaProgram.h - one .ptp holding every NTP replica ----*- C++ -*-===//
//
// Nonuniform tensor parallelism (docs/nonuniform-tp.md): each replica's step
// is compiled as the uniform program of its tp degree; this writes the
// program that holds them all (ptp::Replica), which partition-run runs on
// the sum of their degrees.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_REPLICAPROGRAM_H
#define PARTITION_LOWERING_REPLICAPROGRAM_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace partition {

/// One replica: its degree, its rows of the global batch and its program
/// (writeProgram's bytes).
struct ReplicaPart {
  int64_t tp = 1;
  int64_t batchOffset = 0, batchRows = 0;
  std::string program;
};

/// Writes the program of `replicas` (at least one, in rank order): their
/// programs nested, the model and training description of the first, and
/// the mesh [dp = replicas (data), tp = the largest degree (tensor)].
/// Returns an empty string, or what is wrong with a replica's program.
std::string writeReplicaProgram(llvm::ArrayRef<ReplicaPart> replicas,
                                llvm::raw_ostream &os);

} // namespace partition

#endif // PARTITION_LOWERING_REPLICAPROGRAM_H
