//===- TempDirTest.h - a fresh directory per interop test -------*- C++ -*-===//
//
// The fixture the interop tests share: each test gets its own empty
// directory (named after the process and the test), removed after it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_UNITTESTS_INTEROP_TEMPDIRTEST_H
#define PARTITION_UNITTESTS_INTEROP_TEMPDIRTEST_H

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

namespace partition::interop::testing {

class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("partition-interop-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::string path(const std::string &name) const {
    return (dir / name).string();
  }

  std::filesystem::path dir;
};

} // namespace partition::interop::testing

#endif // PARTITION_UNITTESTS_INTEROP_TEMPDIRTEST_H
