//===- CheckedSize.h - element and byte counts that cannot wrap -*- C++ -*-===//
//
// MLIR's ShapedType::getNumElements multiplies the dimensions without a
// check, so a large enough model wraps around to a small or negative size
// and is then planned, reported and run with it. Every size the compiler
// derives from a shape goes through these instead.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_CHECKEDSIZE_H
#define PARTITION_DIALECTS_CHECKEDSIZE_H

#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cstdint>
#include <optional>

namespace partition {

/// The most bytes a memory plan may lay out: 2^48, what 48-bit virtual
/// addresses (x86-64, ARMv8) can reach. Below it, sums of a program's byte
/// counts cannot overflow int64.
inline constexpr int64_t kMaxAddressableBytes = int64_t(1) << 48;

/// The product of `shape`, or nullopt when it overflows int64 (or a
/// dimension is dynamic or negative).
inline std::optional<int64_t> checkedElementCount(llvm::ArrayRef<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    std::optional<int64_t> product = llvm::checkedMul(elements, dim);
    if (!product)
      return std::nullopt;
    elements = *product;
  }
  return elements;
}

/// Bytes of a statically shaped tensor or memref of whole-byte elements, or
/// nullopt when the count overflows int64.
inline std::optional<int64_t> checkedByteSize(mlir::ShapedType type) {
  std::optional<int64_t> elements = checkedElementCount(type.getShape());
  if (!elements)
    return std::nullopt;
  return llvm::checkedMul(
      *elements, static_cast<int64_t>((type.getElementTypeBitWidth() + 7) / 8));
}

/// a + b, or INT64_MAX where that overflows.
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  std::optional<int64_t> sum = llvm::checkedAdd(a, b);
  return sum ? *sum : INT64_MAX;
}

/// The bytes of a statically shaped tensor or memref type for analyses and
/// estimates (activation memory, stage costs, report lines): checkedByteSize
/// saturated at INT64_MAX where it overflows -- a size that large is refused
/// where buffers are placed (the memory plan) -- and 0 for a type that is
/// not a static shaped type. `bytesPerElement` overrides the element type's
/// width (the activation analysis counts 16-bit activations).
inline int64_t saturatedByteSize(mlir::Type type,
                                 std::optional<int64_t> bytesPerElement = {}) {
  auto shaped = llvm::dyn_cast<mlir::ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  std::optional<int64_t> elements = checkedElementCount(shaped.getShape());
  int64_t width = bytesPerElement
                      ? *bytesPerElement
                      : static_cast<int64_t>(
                            (shaped.getElementTypeBitWidth() + 7) / 8);
  std::optional<int64_t> bytes =
      elements ? llvm::checkedMul(*elements, width) : std::nullopt;
  return bytes ? *bytes : INT64_MAX;
}

/// The bytes of `type` as a double, for messages about sizes that do not fit
/// int64.
inline double approximateByteSize(mlir::ShapedType type) {
  double bytes = (type.getElementTypeBitWidth() + 7) / 8;
  for (int64_t dim : type.getShape())
    bytes *= static_cast<double>(dim);
  return bytes;
}

} // namespace partition

#endif // PARTITION_DIALECTS_CHECKEDSIZE_H
