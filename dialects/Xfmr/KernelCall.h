//===- KernelCall.h - the runtime kernel an xfmr op lowers to ---*- C++ -*-===//
//
// What RuntimeKernelOpInterface returns: a row of the runtime's kernel table
// (runtime/program/Kernels.def) and the parameters the op passes to it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_XFMR_KERNELCALL_H
#define PARTITION_DIALECTS_XFMR_KERNELCALL_H

#include "runtime/program/KernelTable.h"

#include "llvm/ADT/SmallVector.h"

namespace partition::xfmr {

struct KernelCall {
  runtime::KernelId kernel;
  /// The instruction's integer and float parameters, in the order of the
  /// kernel's row (their counts are checked by the rt.kernel verifier).
  llvm::SmallVector<int64_t, 3> ints = {};
  llvm::SmallVector<float, 4> floats = {};
};

} // namespace partition::xfmr

#endif // PARTITION_DIALECTS_XFMR_KERNELCALL_H
