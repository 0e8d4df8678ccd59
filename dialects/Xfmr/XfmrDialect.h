//===- XfmrDialect.h - the transformer model dialect ------------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_XFMR_XFMRDIALECT_H
#define PARTITION_DIALECTS_XFMR_XFMRDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "dialects/Xfmr/XfmrDialect.h.inc"

#endif // PARTITION_DIALECTS_XFMR_XFMRDIALECT_H
