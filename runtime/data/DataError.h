//===- DataError.h - the one error type of the data module ------*- C++ -*-===//
//
// Every failure of the data module (missing or corrupt token files, ids
// outside the vocabulary, too few tokens for a batch, bad arguments) throws a
// DataError whose message is one line: what is wrong, the file or source, and
// what to do about it. Callers (partition-run) print what() and exit.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_DATA_DATAERROR_H
#define PARTITION_RUNTIME_DATA_DATAERROR_H

#include <stdexcept>
#include <string>

namespace partition::runtime::data {

class DataError : public std::runtime_error {
public:
  explicit DataError(const std::string &message)
      : std::runtime_error(message) {}
};

} // namespace partition::runtime::data

#endif // PARTITION_RUNTIME_DATA_DATAERROR_H
