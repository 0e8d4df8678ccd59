//===- Checkpoint.h - a training checkpoint directory -----------*- C++ -*-===//
//
// A checkpoint is a directory holding one file, DIR/checkpoint.safetensors:
//
//   tensors       "<param>"          the parameter, fp32 master weights
//                 "<param>.adam_m"   AdamW first moment   (adamMName)
//                 "<param>.adam_v"   AdamW second moment  (adamVName)
//                 each one logical (unpartitioned) tensor, row-major, in the
//                 order the caller gives
//   __metadata__  "checkpoint_version"  "1"
//                 "step"                optimizer steps completed, decimal
//                 "data_position"       next position in the token data
//                 "seed"                the run's RNG seed, decimal
//                 plus any extra string pairs the caller adds
//
// saveCheckpoint creates DIR (and its parents) if missing and replaces the
// file atomically (see AtomicFile), so DIR always holds either the previous
// checkpoint or the new one, whole. Every error is a CheckpointError.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define PARTITION_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/checkpoint/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace partition::runtime::checkpoint {

/// The file inside a checkpoint directory.
inline constexpr const char *kCheckpointFileName = "checkpoint.safetensors";
/// The layout version saveCheckpoint writes and openCheckpoint accepts.
inline constexpr int64_t kCheckpointVersion = 1;

/// DIR/checkpoint.safetensors.
std::string checkpointFile(const std::string &dir);
/// "<param>.adam_m" and "<param>.adam_v".
std::string adamMName(const std::string &param);
std::string adamVName(const std::string &param);

/// The scalars of a training run, stored as decimal strings in __metadata__.
struct TrainingState {
  /// Optimizer steps completed.
  int64_t step = 0;
  /// Where the data loader continues (its own unit, e.g. a token index).
  int64_t dataPosition = 0;
  /// The run's RNG seed.
  uint64_t seed = 0;
};

/// Writes DIR/checkpoint.safetensors atomically, creating DIR if missing.
/// `extra` may not use the keys of TrainingState or "checkpoint_version".
void saveCheckpoint(const std::string &dir,
                    const std::vector<TensorRef> &tensors,
                    const TrainingState &state, const Metadata &extra = {});

struct Checkpoint {
  /// The validated file; read tensors with tensors.read(...).
  Safetensors tensors;
  TrainingState state;
};

/// Opens and validates DIR/checkpoint.safetensors and parses its state.
Checkpoint openCheckpoint(const std::string &dir);

} // namespace partition::runtime::checkpoint

#endif // PARTITION_RUNTIME_CHECKPOINT_CHECKPOINT_H
