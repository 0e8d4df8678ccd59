//===- Checkpoint.cpp - a training checkpoint directory -------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/checkpoint/AtomicFile.h"

#include <charconv>
#include <filesystem>
#include <system_error>

namespace partition::runtime::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char *kVersionKey = "checkpoint_version";
constexpr const char *kStepKey = "step";
constexpr const char *kDataPositionKey = "data_position";
constexpr const char *kSeedKey = "seed";

/// Creates `dir` and its missing parents, then fsyncs the parent of each
/// directory created so that the new entries are durable.
void createDirectories(const std::string &dir) {
  std::vector<fs::path> missing;
  std::error_code error;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty();
       p = p.parent_path()) {
    if (fs::exists(p, error))
      break;
    missing.push_back(p);
    if (p == p.parent_path())
      break;
  }
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir))
    throw CheckpointError("cannot create checkpoint directory '" + dir + "': " +
                          (error ? error.message()
                                 : std::string("it exists and is not a "
                                               "directory")) +
                          "; choose another path or fix its permissions");
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    fs::path parent = it->parent_path();
    syncDirectory(parent.empty() ? "." : parent.string());
  }
}

template <typename Int>
Int parseInteger(const Safetensors &file, const char *key) {
  const std::string &text = file.metadata(key);
  Int value{};
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty())
    throw CheckpointError(file.path() + ": metadata \"" + key + "\" is \"" +
                          text +
                          "\", not a decimal integer in range; the "
                          "checkpoint is corrupt, use another one");
  return value;
}

} // namespace

std::string checkpointFile(const std::string &dir) {
  return (fs::path(dir) / kCheckpointFileName).string();
}

std::string adamMName(const std::string &param) { return param + ".adam_m"; }

std::string adamVName(const std::string &param) { return param + ".adam_v"; }

void saveCheckpoint(const std::string &dir,
                    const std::vector<TensorRef> &tensors,
                    const TrainingState &state, const Metadata &extra) {
  Metadata metadata = extra;
  auto put = [&](const char *key, std::string value) {
    if (!metadata.emplace(key, std::move(value)).second)
      throw CheckpointError(
          "cannot write '" + checkpointFile(dir) +
          "': extra metadata may not use the reserved key \"" + key +
          "\"; rename it");
  };
  put(kVersionKey, std::to_string(kCheckpointVersion));
  put(kStepKey, std::to_string(state.step));
  put(kDataPositionKey, std::to_string(state.dataPosition));
  put(kSeedKey, std::to_string(state.seed));
  createDirectories(dir);
  writeSafetensors(checkpointFile(dir), tensors, metadata);
}

Checkpoint openCheckpoint(const std::string &dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw CheckpointError(
        "'" + dir + "' is not a checkpoint directory (" +
        (fs::exists(dir, error) ? "not a directory" : "no such directory") +
        "); check the path, or save a checkpoint there "
        "first");
  Safetensors file = Safetensors::open(checkpointFile(dir));
  int64_t version = parseInteger<int64_t>(file, kVersionKey);
  if (version != kCheckpointVersion)
    throw CheckpointError(file.path() + ": checkpoint_version is " +
                          std::to_string(version) + " but this runtime reads " +
                          std::to_string(kCheckpointVersion) +
                          "; use the runtime that wrote it");
  TrainingState state;
  state.step = parseInteger<int64_t>(file, kStepKey);
  state.dataPosition = parseInteger<int64_t>(file, kDataPositionKey);
  state.seed = parseInteger<uint64_t>(file, kSeedKey);
  return Checkpoint{std::move(file), state};
}

} // namespace partition::runtime::checkpoint
