//===- Checkpoint.cpp - a training checkpoint directory -------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/checkpoint/Crc32c.h"
#include "support/JsonReader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

namespace partition::runtime::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char *kVersionKey = "checkpoint_version";
constexpr const char *kStepKey = "step";
constexpr const char *kDataPositionKey = "data_position";
constexpr const char *kSeedKey = "seed";
constexpr const char *kModelKey = "model";
constexpr const char *kChecksumPrefix = "crc32c:";
/// A tensor cannot be named "__metadata__": no clash with a tensor's key.
constexpr const char *kMetadataChecksumKey = "crc32c:__metadata__";

constexpr const char *kCorrupt =
    "the checkpoint is corrupt; restore it or use another checkpoint";
constexpr const char *kOtherModel =
    "the checkpoint was written for another model; resume with the program "
    "of that model, or start without --resume";

/// `text` quoted for a one-line message.
std::string quote(const std::string &text) {
  return nlohmann::json(text).dump(-1, ' ', false,
                                   nlohmann::json::error_handler_t::replace);
}

std::string hex8(uint32_t value) {
  char text[9];
  static const char digits[] = "0123456789abcdef";
  for (int i = 7; i >= 0; --i, value >>= 4)
    text[i] = digits[value & 0xf];
  text[8] = '\0';
  return text;
}

/// The value of 8 lowercase hex digits, or nothing.
std::optional<uint32_t> parseHex8(const std::string &text) {
  if (text.size() != 8)
    return std::nullopt;
  uint32_t value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0)
      return std::nullopt;
    value = value << 4 | uint32_t(digit);
  }
  return value;
}

bool startsWith(const std::string &text, const char *prefix) {
  return text.compare(0, std::strlen(prefix), prefix) == 0;
}

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
  // create_directories says only "Not a directory" for a file in the way.
  if (fs::exists(dir, error) && !fs::is_directory(dir, error))
    throw CheckpointError("cannot create checkpoint directory '" + dir +
                          "': it exists and is not a directory; choose "
                          "another path");
  error.clear();
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
Int parseInteger(const Safetensors &file, const std::string &key) {
  const std::string &text = file.metadata(key);
  Int value{};
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty())
    throw CheckpointError(file.path() + ": metadata " + quote(key) + " is " +
                          quote(text) +
                          ", not a decimal integer in range; the "
                          "checkpoint is corrupt, use another one");
  return value;
}

/// The index of the first element of `bytes` of values of type T (read
/// unaligned) for which `matches` holds, or nothing.
template <typename T, typename Predicate>
std::optional<size_t> firstMatch(const void *data, size_t bytes,
                                 Predicate matches) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < bytes / sizeof(T); ++i) {
    T value;
    std::memcpy(&value, p + sizeof(T) * i, sizeof(T));
    if (matches(value))
      return i;
  }
  return std::nullopt;
}

/// The index of the first value of a floating-point tensor that is NaN or
/// infinite, or nothing (also for the other dtypes).
std::optional<size_t> firstNonFinite(DType dtype, const void *data,
                                     size_t bytes) {
  auto nonFinite = [](auto value) { return !std::isfinite(value); };
  switch (dtype) {
  case DType::F32:
    return firstMatch<float>(data, bytes, nonFinite);
  case DType::F64:
    return firstMatch<double>(data, bytes, nonFinite);
  case DType::BF16:
  case DType::F16: {
    // Non-finite: every exponent bit set.
    uint16_t exponent = dtype == DType::BF16 ? 0x7f80 : 0x7c00;
    return firstMatch<uint16_t>(data, bytes, [&](uint16_t bits) {
      return (bits & exponent) == exponent;
    });
  }
  default:
    return std::nullopt;
  }
}

/// The index of the first value of a floating-point tensor below zero (-0
/// is not), or nothing (also for the other dtypes).
std::optional<size_t> firstNegative(DType dtype, const void *data,
                                    size_t bytes) {
  auto negative = [](auto value) { return value < 0; };
  switch (dtype) {
  case DType::F32:
    return firstMatch<float>(data, bytes, negative);
  case DType::F64:
    return firstMatch<double>(data, bytes, negative);
  case DType::BF16:
  case DType::F16:
    // The sign bit set on anything but zero.
    return firstMatch<uint16_t>(data, bytes, [](uint16_t bits) {
      return (bits & 0x8000) && (bits & 0x7fff);
    });
  default:
    return std::nullopt;
  }
}

/// Whether `name` is an AdamW second moment, whose values are squares'
/// averages: never negative.
bool isSecondMoment(const std::string &name) {
  const std::string suffix = adamVName("");
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// What is wrong with the values of tensor `name` (non-finite anywhere, or
/// negative in a second moment), as "tensor "x" holds ...", or "".
std::string valueProblem(const std::string &name, DType dtype,
                         const void *data, size_t bytes, int64_t elements) {
  if (std::optional<size_t> at = firstNonFinite(dtype, data, bytes))
    return "tensor " + quote(name) + " holds a non-finite value (NaN or "
           "infinity) at element " + std::to_string(*at) + " of " +
           std::to_string(elements);
  if (isSecondMoment(name))
    if (std::optional<size_t> at = firstNegative(dtype, data, bytes))
      return "tensor " + quote(name) + " (an AdamW second moment, never "
             "negative) holds a negative value at element " +
             std::to_string(*at) + " of " + std::to_string(elements);
  return "";
}

/// The CRC-32C of every metadata entry but its own checksum, in key order,
/// each as key NUL value NUL: the step, data position, model and the
/// tensors' checksums are covered, so an edited digit cannot go unnoticed.
uint32_t metadataChecksum(const Metadata &metadata) {
  uint32_t crc = 0;
  for (const auto &[key, value] : metadata) {
    if (key == kMetadataChecksumKey)
      continue;
    crc = crc32c(key.data(), key.size() + 1, crc);
    crc = crc32c(value.data(), value.size() + 1, crc);
  }
  return crc;
}

/// A JSON value for a message, cut short if long.
std::string excerpt(const nlohmann::json *value) {
  if (!value)
    return "absent";
  // ASCII (escaped), so that cutting it cannot split a UTF-8 sequence.
  std::string text =
      value->dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

} // namespace

std::string checkpointFile(const std::string &dir) {
  return (fs::path(dir) / kCheckpointFileName).string();
}

std::string adamMName(const std::string &param) { return param + ".adam_m"; }

std::string adamVName(const std::string &param) { return param + ".adam_v"; }

std::string checksumKey(const std::string &tensor) {
  return kChecksumPrefix + tensor;
}

void saveCheckpoint(const std::string &dir,
                    const std::vector<TensorRef> &tensors,
                    const TrainingState &state, const Metadata &extra) {
  for (const auto &[key, value] : extra)
    if (startsWith(key, kChecksumPrefix))
      throw CheckpointError("cannot write '" + checkpointFile(dir) +
                            "': extra metadata may not use the reserved "
                            "prefix \"crc32c:\" (key " +
                            quote(key) + "); rename it");
  // Nothing is written that a resume would refuse: a diverged run stops
  // here, and DIR keeps its previous checkpoint.
  for (const TensorRef &tensor : tensors) {
    if (!tensor.data)
      continue;
    std::string problem = valueProblem(
        tensor.name, tensor.dtype, tensor.data, tensor.bytes,
        static_cast<int64_t>(tensor.bytes / dtypeSize(tensor.dtype)));
    if (!problem.empty())
      throw CheckpointError(
          "not writing '" + checkpointFile(dir) + "': " + problem +
          "; the run has diverged (lower --lr, or resume from an earlier "
          "checkpoint); the checkpoint already in '" + dir +
          "', if any, is kept");
  }
  Metadata metadata = extra;
  auto put = [&](const std::string &key, std::string value) {
    if (!metadata.emplace(key, std::move(value)).second)
      throw CheckpointError(
          "cannot write '" + checkpointFile(dir) +
          "': extra metadata may not use the reserved key " + quote(key) +
          "; rename it");
  };
  put(kVersionKey, std::to_string(kCheckpointVersion));
  put(kStepKey, std::to_string(state.step));
  put(kDataPositionKey, std::to_string(state.dataPosition));
  put(kSeedKey, std::to_string(state.seed));
  for (const TensorRef &tensor : tensors)
    // A name given twice is writeSafetensors' error, with its message.
    metadata[checksumKey(tensor.name)] =
        hex8(tensor.bytes > 0 && tensor.data
                 ? crc32c(tensor.data, tensor.bytes)
                 : 0);
  metadata[kMetadataChecksumKey] = hex8(metadataChecksum(metadata));
  createDirectories(dir);
  removeStaleTemporaries(checkpointFile(dir));
  writeSafetensors(checkpointFile(dir), tensors, metadata);
}

void checkSaveDirectory(const std::string &dir) {
  createDirectories(dir);
  // The same steps as a save, short of the rename: a temporary file beside
  // the checkpoint, written, then removed (by the destructor).
  AtomicFile probe(checkpointFile(dir));
  const char bytes[] = "partition-run: probe of the --save directory\n";
  probe.write(bytes, sizeof(bytes) - 1);
}

int64_t integerMetadata(const Safetensors &file, const std::string &key) {
  return parseInteger<int64_t>(file, key);
}

ExistingCheckpoint existingCheckpoint(const std::string &dir, int64_t *step) {
  std::error_code error;
  if (!fs::exists(checkpointFile(dir), error))
    return ExistingCheckpoint::None;
  try {
    Checkpoint checkpoint = openCheckpointFile(checkpointFile(dir));
    if (step)
      *step = checkpoint.state.step;
    for (const std::string &name : checkpoint.tensors.names())
      if (name.size() > adamMName("").size() &&
          name.compare(name.size() - adamMName("").size(), std::string::npos,
                       adamMName("")) == 0)
        return ExistingCheckpoint::Training;
    return ExistingCheckpoint::WeightsOnly;
  } catch (const CheckpointError &) {
    return ExistingCheckpoint::Unreadable;
  }
}

Checkpoint openCheckpoint(const std::string &dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw CheckpointError(
        "'" + dir + "' is not a checkpoint directory (" +
        (fs::exists(dir, error) ? "not a directory" : "no such directory") +
        "); check the path, or save a checkpoint there "
        "first");
  return openCheckpointFile(checkpointFile(dir));
}

Checkpoint openCheckpointFile(const std::string &path) {
  Safetensors file = Safetensors::open(path);
  int64_t version = parseInteger<int64_t>(file, kVersionKey);
  if (version < kOldestCheckpointVersion || version > kCheckpointVersion)
    throw CheckpointError(file.path() + ": checkpoint_version is " +
                          std::to_string(version) + " but this runtime reads " +
                          std::to_string(kOldestCheckpointVersion) + " to " +
                          std::to_string(kCheckpointVersion) +
                          "; use the runtime that wrote it");
  const Metadata &metadata = file.metadata();
  if (version < 2) {
    // A genuine version 1 file has no checksums: one that has them is a
    // newer file whose version was damaged into skipping its checks.
    for (const auto &[key, value] : metadata)
      if (startsWith(key, kChecksumPrefix))
        throw CheckpointError(file.path() + ": checkpoint_version is " +
                              std::to_string(version) +
                              " but the file has checksums (" + quote(key) +
                              "), which came with version 2; " + kCorrupt);
  } else {
    // The metadata first: then the tensors' checksums in it are trusted.
    auto it = metadata.find(kMetadataChecksumKey);
    std::optional<uint32_t> stored;
    if (it != metadata.end())
      stored = parseHex8(it->second);
    if (!stored)
      throw CheckpointError(
          file.path() + ": the metadata checksum " +
          quote(kMetadataChecksumKey) + " is " +
          (it == metadata.end() ? std::string("missing")
                                : quote(it->second) +
                                      ", not 8 lowercase hex digits") +
          "; " + kCorrupt);
    uint32_t actual = metadataChecksum(metadata);
    if (actual != *stored)
      throw CheckpointError(file.path() + ": the metadata (step, data "
                            "position, model, checksums) fails its checksum "
                            "(CRC-32C " +
                            hex8(actual) + ", stored " + hex8(*stored) +
                            "): the header changed after it was written; " +
                            kCorrupt);
    // Every tensor has a well-formed checksum, and every checksum a tensor:
    // a header edited to drop or rename either is corrupt.
    for (const std::string &name : file.names()) {
      auto it = file.metadata().find(checksumKey(name));
      if (it == file.metadata().end())
        throw CheckpointError(file.path() + ": tensor " + quote(name) +
                              " has no checksum (metadata " +
                              quote(checksumKey(name)) + "); " + kCorrupt);
      if (!parseHex8(it->second))
        throw CheckpointError(file.path() + ": the checksum of tensor " +
                              quote(name) + " is " + quote(it->second) +
                              ", not 8 lowercase hex digits; " + kCorrupt);
    }
    for (const auto &[key, value] : metadata)
      if (startsWith(key, kChecksumPrefix) && key != kMetadataChecksumKey &&
          !file.contains(key.substr(std::strlen(kChecksumPrefix))))
        throw CheckpointError(file.path() + ": metadata " + quote(key) +
                              " is the checksum of a tensor the file does "
                              "not hold; " +
                              kCorrupt);
  }
  TrainingState state;
  state.step = parseInteger<int64_t>(file, kStepKey);
  state.dataPosition = parseInteger<int64_t>(file, kDataPositionKey);
  state.seed = parseInteger<uint64_t>(file, kSeedKey);
  if (state.step < 0 || state.dataPosition < 0)
    throw CheckpointError(file.path() + ": metadata " +
                          quote(state.step < 0 ? kStepKey : kDataPositionKey) +
                          " is negative; " + kCorrupt);
  Checkpoint checkpoint{std::move(file), state, version};
  return checkpoint;
}

void Checkpoint::read(const std::string &name, DType dtype, const Shape &shape,
                      void *dest, size_t bytes) const {
  tensors.read(name, dtype, shape, dest, bytes);
  if (checksummed()) {
    uint32_t stored = *parseHex8(tensors.metadata(checksumKey(name)));
    uint32_t actual = crc32c(dest, bytes);
    if (actual != stored)
      throw CheckpointError(tensors.path() + ": tensor " + quote(name) +
                            " fails its checksum (CRC-32C " + hex8(actual) +
                            ", stored " + hex8(stored) +
                            "): its bytes changed after it was written; " +
                            kCorrupt);
  }
  std::string problem = valueProblem(name, dtype, dest, bytes,
                                     tensors.info(name).elements());
  if (!problem.empty())
    throw CheckpointError(
        tensors.path() + ": " + problem +
        "; the run that wrote it had diverged or the file was edited, resume "
        "from an earlier checkpoint");
}

void checkSameModel(const Checkpoint &checkpoint,
                    const std::string &programModel, const char *advice) {
  const std::string &path = checkpoint.tensors.path();
  const std::string &stored = checkpoint.tensors.metadata(kModelKey);
  // The shared reader (support/JsonReader.h): a key given twice is corrupt
  // too, not silently the last.
  std::string problem;
  nlohmann::json theirs =
      jsonreader::parseJson(stored, problem).value_or(nlohmann::json());
  if (!theirs.is_object())
    throw CheckpointError(path + ": metadata \"model\" is not a JSON object" +
                          (problem.empty() ? "" : " (" + problem + ")") +
                          "; " + kCorrupt);
  nlohmann::json mine =
      jsonreader::parseJson(programModel, problem).value_or(nlohmann::json());
  if (!mine.is_object())
    throw CheckpointError("the program's model description is not a JSON "
                          "object; this is a bug in the caller");
  std::set<std::string> fields;
  for (auto it = theirs.begin(); it != theirs.end(); ++it)
    fields.insert(it.key());
  for (auto it = mine.begin(); it != mine.end(); ++it)
    fields.insert(it.key());
  for (const std::string &field : fields) {
    if (std::find_if(std::begin(kTrainingShapeFields),
                     std::end(kTrainingShapeFields), [&](const char *f) {
                       return field == f;
                     }) != std::end(kTrainingShapeFields))
      continue;
    const nlohmann::json *a = theirs.contains(field) ? &theirs[field] : nullptr;
    const nlohmann::json *b = mine.contains(field) ? &mine[field] : nullptr;
    if (a && b && *a == *b)
      continue;
    throw CheckpointError(path + ": the model's " + quote(field) + " is " +
                          excerpt(a) + " in the checkpoint but " + excerpt(b) +
                          " in the program; " +
                          (advice ? advice : kOtherModel));
  }
}

void checkSameTensors(const Checkpoint &checkpoint,
                      const std::vector<ExpectedTensor> &expected,
                      const char *advice) {
  const char *otherModel = advice ? advice : kOtherModel;
  const Safetensors &file = checkpoint.tensors;
  std::set<std::string> names;
  for (const ExpectedTensor &tensor : expected) {
    names.insert(tensor.name);
    if (!file.contains(tensor.name))
      throw CheckpointError(file.path() + ": the program needs tensor " +
                            quote(tensor.name) +
                            ", which the checkpoint does not hold; " +
                            otherModel);
    const TensorInfo &info = file.info(tensor.name);
    if (info.dtype != tensor.dtype || info.shape != tensor.shape)
      throw CheckpointError(file.path() + ": tensor " + quote(tensor.name) +
                            " is " + describe(info.dtype, info.shape) +
                            " in the checkpoint but " +
                            describe(tensor.dtype, tensor.shape) +
                            " in the program; " + otherModel);
  }
  for (const std::string &name : file.names())
    if (!names.count(name))
      throw CheckpointError(file.path() + ": the checkpoint holds tensor " +
                            quote(name) +
                            ", which the program does not have; " +
                            otherModel);
}

} // namespace partition::runtime::checkpoint
