//===- CublasLibraryTest.cpp - cuBLAS loads on first use, not at start-up -===//

#include "runtime/backend/cuda/cublas/CublasLibrary.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

/// Whether a library whose path contains `name` is mapped into this process.
bool mapped(const std::string &name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(name) != std::string::npos;
}

// One test, in this order: the "before" can only be seen once per process.
TEST(CublasLibrary, LoadsOnFirstUseOnly) {
  // Linked (PartitionCublas) but not loaded: a CPU run never maps them.
  EXPECT_FALSE(mapped("libcublasLt.so"));
  EXPECT_FALSE(mapped("libcublas.so"));

  const std::string &error = partition::runtime::cuda::loadCublas();
  if (!error.empty())
    GTEST_SKIP() << error;
  EXPECT_TRUE(mapped("libcublasLt.so"));
  EXPECT_TRUE(mapped("libcublas.so"));
  // The forwarders reach the real functions (no GPU needed for these).
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED),
               "the requested functionality is not supported");
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
               "an unsupported value or parameter was passed to the function");
  // A second call gives the first answer.
  EXPECT_EQ(&partition::runtime::cuda::loadCublas(), &error);
}

} // namespace
