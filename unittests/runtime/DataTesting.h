//===- DataTesting.h - shared checks of the token data tests ------*- C++ -*-===//

#ifndef PARTITION_UNITTESTS_RUNTIME_DATATESTING_H
#define PARTITION_UNITTESTS_RUNTIME_DATATESTING_H

#include "runtime/data/DataError.h"

#include <gtest/gtest.h>

#include <string>

namespace partition::runtime::data::testing {

/// Runs `body`, which must throw DataError, and returns its message.
template <typename Body> std::string errorOf(Body &&body) {
  try {
    body();
  } catch (const DataError &error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle)                                      \
  do {                                                                         \
    const std::string text_ = (haystack);                                      \
    const std::string part_ = (needle);                                        \
    EXPECT_NE(text_.find(part_), std::string::npos)                            \
        << "'" << text_ << "' does not contain '" << part_ << "'";             \
  } while (false)

} // namespace partition::runtime::data::testing

#endif // PARTITION_UNITTESTS_RUNTIME_DATATESTING_H
