//===- InteropError.h - the one error the interop code throws ---*- C++ -*-===//
//
// Every refusal of partition-export / partition-import (a field the model
// cannot express, a missing or mismatched tensor, an unreadable file) is an
// InteropError whose what() is one line: the file or field, the problem and
// what to do. Errors of the checkpoint library (CheckpointError) pass through
// unchanged: they are one line already.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_INTEROP_INTEROPERROR_H
#define PARTITION_INTEROP_INTEROPERROR_H

#include <stdexcept>
#include <string>

namespace partition::interop {

class InteropError : public std::runtime_error {
public:
  explicit InteropError(const std::string &message)
      : std::runtime_error(message) {}
};

} // namespace partition::interop

#endif // PARTITION_INTEROP_INTEROPERROR_H
