//===- ProgramFormat.h - the .ptp FlatBuffer and its version ----*- C++ -*-===//

#ifndef PARTITION_RUNTIME_PROGRAM_PROGRAMFORMAT_H
#define PARTITION_RUNTIME_PROGRAM_PROGRAMFORMAT_H

#include "runtime/program/Program_generated.h"

namespace partition::ptp {

/// Version of Program.fbs together with the kernel table's order (13: the
/// micro-batch loop; 14: its stride, pipelines' loops; 15: the action
/// walk; 16: its repeated slot).
inline constexpr uint32_t kSchemaVersion = 16;

} // namespace partition::ptp

#endif // PARTITION_RUNTIME_PROGRAM_PROGRAMFORMAT_H
