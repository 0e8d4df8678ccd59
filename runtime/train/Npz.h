//===- Npz.h - NumPy .npz archives of a few arrays --------------*- C++ -*-===//
//
// partition-run --dump-logits writes its arrays as NumPy's .npz: a zip
// archive (stored, not compressed) holding one .npy file (format 1.0,
// little-endian) per array, which numpy.load reads without other packages.
// Each array must stay under 4 GiB (no zip64).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_TRAIN_NPZ_H
#define PARTITION_RUNTIME_TRAIN_NPZ_H

#include <cstdint>
#include <string>
#include <vector>

namespace partition::runtime {

/// One array: `name` (the key numpy.load gives it), float32 or int32
/// elements, C order.
struct NpyArray {
  std::string name;
  enum class Type { F32, I32 } type = Type::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// Writes `arrays` to `path` as an .npz archive. Throws std::runtime_error
/// with one line naming the file (or the array too large for a zip without
/// zip64) on failure.
void writeNpz(const std::string &path, const std::vector<NpyArray> &arrays);

/// The .npy bytes of `array`: header and data (tests and writeNpz).
std::string npyBytes(const NpyArray &array);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_TRAIN_NPZ_H
