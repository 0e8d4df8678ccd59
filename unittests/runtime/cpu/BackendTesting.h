//===- BackendTesting.h - the CPU backend's refusal of a program -*- C++ -*-===//
//
// For the CPU backend's tests of hand-made programs it must refuse: the
// message a program gets once it has gone through its .ptp bytes, the
// loader and the backend's construction, where each kernel instruction's
// buffers are checked against its row.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_UNITTESTS_RUNTIME_CPU_BACKENDTESTING_H
#define PARTITION_UNITTESTS_RUNTIME_CPU_BACKENDTESTING_H

#include "runtime/backend/Backend.h"
#include "unittests/runtime/LoaderTesting.h"

#include <string>

namespace partition::testprograms {

/// The CPU backend's message for `program`, or "" when it takes it.
inline std::string backendRejection(const runtime::Program &program) {
  try {
    runtime::createCpuBackend(roundTrip(program));
  } catch (const runtime::ProgramError &error) {
    return error.what();
  }
  return "";
}

} // namespace partition::testprograms

#endif // PARTITION_UNITTESTS_RUNTIME_CPU_BACKENDTESTING_H
