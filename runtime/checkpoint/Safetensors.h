//===- Safetensors.h - read and write the safetensors format ----*- C++ -*-===//
//
// The safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  a JSON object, UTF-8, padded with spaces to a multiple of 8:
//              {"__metadata__": {"key": "value", ...},            (optional)
//               "name": {"dtype": "F32", "shape": [2, 3],
//                        "data_offsets": [begin, end]}, ...}
//   [rest]     the data section: each tensor's bytes, row-major,
//              little-endian, at [begin, end) relative to the section start
//
// The writer produces the same bytes as the reference implementation for the
// same tensor order: compact JSON, "__metadata__" first (only when there is
// metadata; keys sorted), then the tensors in the order given, each as
// {"dtype","shape","data_offsets"}, packed back to back from offset 0.
// Unlike the reference, the writer does not reorder tensors: put the widest
// dtypes first if readers need aligned data (the data section starts 8-byte
// aligned).
//
// The reader checks the whole file on open() the way the reference does
// (header within the file and under 100 MB, a JSON object, every entry
// complete, known dtypes, offsets that match dtype x shape and tile the data
// section exactly with no gap, overlap or trailing byte) and reads tensors
// with pread, so a Safetensors may be read from several threads at once.
// Tensor data is copied as is: the host must be little-endian.
//
// Every error is a CheckpointError (one line: the file, the problem, what to
// do).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define PARTITION_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include "runtime/checkpoint/CheckpointError.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace partition::runtime::checkpoint {

/// The safetensors dtypes of whole bytes (the sub-byte F4/F6 types are not
/// supported). Names are the format's: DType::F32 is "F32".
enum class DType {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  C64,
  F64,
  I64,
  U64,
};

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// The format's name, e.g. "F32".
const char *dtypeName(DType dtype);
/// The dtype named `name`, or nothing if this library does not know it.
std::optional<DType> parseDType(std::string_view name);

using Shape = std::vector<int64_t>;
/// "__metadata__": string keys to string values.
using Metadata = std::map<std::string, std::string>;

/// A tensor to write: `bytes` must equal the product of `shape` times
/// dtypeSize(dtype) (a rank-0 shape holds one element).
struct TensorRef {
  std::string name;
  DType dtype;
  Shape shape;
  const void *data;
  size_t bytes;
};

/// Writes `tensors` (in this order) and `metadata` to `path` atomically
/// (AtomicFile: temporary file, fsync, rename, fsync of the directory).
/// Names must be unique, non-empty, valid UTF-8 and not "__metadata__"; all
/// of this and the sizes are checked before anything is written.
void writeSafetensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const Metadata &metadata = {});

/// One tensor of an opened file.
struct TensorInfo {
  DType dtype;
  Shape shape;
  /// [begin, end) relative to the start of the data section.
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t bytes() const { return end - begin; }
  int64_t elements() const;
};

/// A validated safetensors file, open for reading.
class Safetensors {
public:
  /// Opens and validates `path`; throws CheckpointError on any problem.
  static Safetensors open(const std::string &path);

  Safetensors(Safetensors &&other) noexcept;
  Safetensors &operator=(Safetensors &&other) noexcept;
  Safetensors(const Safetensors &) = delete;
  Safetensors &operator=(const Safetensors &) = delete;
  ~Safetensors();

  const std::string &path() const { return path_; }
  /// Tensor names in file (data offset) order.
  const std::vector<std::string> &names() const { return names_; }
  bool contains(const std::string &name) const;
  /// Throws if `name` is absent.
  const TensorInfo &info(const std::string &name) const;
  const Metadata &metadata() const { return metadata_; }
  /// The metadata value of `key`; throws if absent.
  const std::string &metadata(const std::string &key) const;

  /// Reads tensor `name` into `dest` after checking that it is `dtype` with
  /// exactly `shape` and that `bytes` is its size.
  void read(const std::string &name, DType dtype, const Shape &shape,
            void *dest, size_t bytes) const;
  /// Reads tensor `name` into `dest`, checking only that `bytes` is its size.
  void readRaw(const std::string &name, void *dest, size_t bytes) const;
  /// Reads bytes [offset, offset + bytes) of tensor `name` (one shard of a
  /// row-major tensor, say).
  void readBytes(const std::string &name, uint64_t offset, void *dest,
                 size_t bytes) const;

private:
  Safetensors() = default;
  void preadExactly(uint64_t fileOffset, void *dest, size_t bytes) const;

  std::string path_;
  int fd_ = -1;
  uint64_t dataStart_ = 0;
  std::vector<std::string> names_;
  std::unordered_map<std::string, TensorInfo> tensors_;
  Metadata metadata_;
};

/// "F32[2, 3]": for messages.
std::string describe(DType dtype, const Shape &shape);

} // namespace partition::runtime::checkpoint

#endif // PARTITION_RUNTIME_CHECKPOINT_SAFETENSORS_H
