//===- Checkpoint.h - a training checkpoint directory -----------*- C++ -*-===//
//
// A checkpoint is a directory holding one file, DIR/checkpoint.safetensors:
//
//   tensors       "<param>"          the parameter, fp32 master weights
//                 "<param>.adam_m"   AdamW first moment   (adamMName)
//                 "<param>.adam_v"   AdamW second moment  (adamVName)
//                 each one logical (unpartitioned) tensor, row-major, in the
//                 order the caller gives
//   __metadata__  "checkpoint_version"  "2"
//                 "step"                optimizer steps completed, decimal
//                 "data_position"       next position in the token data
//                 "seed"                the run's RNG seed, decimal
//                 "crc32c:<tensor>"     CRC-32C of the tensor's bytes, 8
//                                       lowercase hex digits, one per tensor
//                 "crc32c:__metadata__" CRC-32C of every other entry, in key
//                                       order, each as key NUL value NUL
//                 plus any extra string pairs the caller adds
//
// The checksums live in the metadata (strings), so the file stays a plain
// safetensors file that other readers load. Version 1 files (written before
// checksums) are still read, unverified: Checkpoint::checksummed() says so
// and the caller warns; a version 1 file with checksums is refused (a
// damaged version number must not switch the checks off).
//
// saveCheckpoint creates DIR (and its parents) if missing, removes the stale
// temporaries of dead writers (removeStaleTemporaries), and replaces the
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
/// The layout version saveCheckpoint writes.
inline constexpr int64_t kCheckpointVersion = 2;
/// The oldest version openCheckpoint reads: 1, before checksums.
inline constexpr int64_t kOldestCheckpointVersion = 1;

/// DIR/checkpoint.safetensors.
std::string checkpointFile(const std::string &dir);
/// "<param>.adam_m" and "<param>.adam_v".
std::string adamMName(const std::string &param);
std::string adamVName(const std::string &param);
/// "crc32c:<tensor>": the metadata key of a tensor's checksum.
std::string checksumKey(const std::string &tensor);

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
/// `extra` may not use the keys of TrainingState, "checkpoint_version" or
/// the "crc32c:" prefix.
void saveCheckpoint(const std::string &dir,
                    const std::vector<TensorRef> &tensors,
                    const TrainingState &state, const Metadata &extra = {});

/// Checks that checkpoints can be saved into DIR: creates it (and its
/// parents) if missing, then creates, writes and removes a temporary file
/// there as saveCheckpoint would. Call it at start-up, so that an unusable
/// directory fails before the work rather than after it.
void checkSaveDirectory(const std::string &dir);

struct Checkpoint {
  /// The structurally valid file. Read tensors with Checkpoint::read, which
  /// verifies them; tensors.read(...) reads bytes unverified.
  Safetensors tensors;
  TrainingState state;
  /// The layout version the file was written with.
  int64_t version = kCheckpointVersion;

  /// False for files written before checksums (version 1): read() then
  /// checks the values but cannot check the bytes.
  bool checksummed() const { return version >= 2; }

  /// Reads tensor `name` whole into `dest` (it must be `dtype` with exactly
  /// `shape`, `bytes` long), then checks it: its CRC-32C against the stored
  /// one, and for floating-point dtypes that every value is finite. The
  /// error names the tensor and the file.
  void read(const std::string &name, DType dtype, const Shape &shape,
            void *dest, size_t bytes) const;
};

/// What a directory a tool is about to save into holds already, so that no
/// tool replaces a checkpoint of another kind without being told to.
enum class ExistingCheckpoint {
  /// No DIR/checkpoint.safetensors.
  None,
  /// Parameters only (partition-import's).
  WeightsOnly,
  /// Parameters and AdamW moments (partition-run --save's).
  Training,
  /// A file that does not open as a checkpoint.
  Unreadable,
};
/// The kind of checkpoint in DIR; `step` (when given) gets its step. Reads
/// the header only; never throws.
ExistingCheckpoint existingCheckpoint(const std::string &dir,
                                      int64_t *step = nullptr);

/// Opens and validates DIR/checkpoint.safetensors and parses its state.
Checkpoint openCheckpoint(const std::string &dir);
/// The same for a checkpoint file given by its own path.
Checkpoint openCheckpointFile(const std::string &path);

/// The decimal integer metadata value of `key` (throws if absent or not an
/// integer in range).
int64_t integerMetadata(const Safetensors &file, const std::string &key);

/// The model-configuration fields that may differ between a checkpoint and
/// the program that resumes it: they shape the training batch, not the
/// parameters (a run may change its batch or sequence length on resume).
inline constexpr const char *kTrainingShapeFields[] = {"batch", "seq_len"};

/// Throws unless the checkpoint's "model" metadata (a JSON object, as
/// partition-run writes it) and `programModel` (the same, from the program)
/// agree on every field but kTrainingShapeFields, naming the first field
/// (in sorted order) that differs. `advice` ends that message (default:
/// what to do for --resume).
void checkSameModel(const Checkpoint &checkpoint,
                    const std::string &programModel,
                    const char *advice = nullptr);

/// A tensor the program expects in a checkpoint.
struct ExpectedTensor {
  std::string name;
  DType dtype;
  Shape shape;
};

/// Throws unless the checkpoint holds exactly the tensors `expected`, of
/// those dtypes and shapes, naming the first difference: an expected tensor
/// that is missing or of another dtype or shape (in the order given), else
/// a tensor of the checkpoint that is not expected (in file order).
void checkSameTensors(const Checkpoint &checkpoint,
                      const std::vector<ExpectedTensor> &expected,
                      const char *advice = nullptr);

} // namespace partition::runtime::checkpoint

#endif // PARTITION_RUNTIME_CHECKPOINT_CHECKPOINT_H
