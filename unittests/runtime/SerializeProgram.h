//===- SerializeProgram.h - a Program back to .ptp bytes --------*- C++ -*-===//
//
// Tests only: builds the FlatBuffer of a runtime::Program field by field, so
// that tests can start from a loaded (or hand-made) program, change it --
// add a mesh and collectives, or break them on purpose -- and load it again.
// Values are written as given, valid or not.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_UNITTESTS_RUNTIME_SERIALIZEPROGRAM_H
#define PARTITION_UNITTESTS_RUNTIME_SERIALIZEPROGRAM_H

#include "runtime/program/Program.h"
#include "runtime/program/ProgramFormat.h"

#include <cstdint>
#include <string>
#include <vector>

namespace partition::testprograms {

/// The .ptp bytes of `program`, of schema `version` (the current one
/// unless a test writes an older file).
std::string serializeProgram(const runtime::Program &program,
                             uint32_t version = ptp::kSchemaVersion);

/// A minimal valid program: f32 buffers "a" [4], "b" [2, 3], "c" [5], and
/// the tokens, targets and loss buffers; a train_step with no instructions.
runtime::Program minimalProgram();

/// Appends a buffer of `dtype` at the end of `program`'s arena, growing
/// it; returns its index.
uint32_t addArenaBuffer(runtime::Program &program, const char *name,
                        runtime::DType dtype, std::vector<int64_t> shape,
                        runtime::Role role = runtime::Role::Temporary);

} // namespace partition::testprograms

#endif // PARTITION_UNITTESTS_RUNTIME_SERIALIZEPROGRAM_H
