//===- MakeDpProgram.cpp - a single-device program made data parallel -----===//
//
//   partition-test-dp-program IN.ptp OUT.ptp --dp N [--bucket-bytes B]
//
// What the data-parallel pass does, done by hand on a compiled program
// (DataParallelByHand.h; buckets of about B bytes, default 256 KiB), for the
// runtime's multi-rank tests. IN must be compiled for the local batch
// (global batch / N rows).
//
//===----------------------------------------------------------------------===//

#include "runtime/program/Program.h"
#include "unittests/runtime/DataParallelByHand.h"
#include "unittests/runtime/SerializeProgram.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

using namespace partition;
using namespace partition::runtime;

int main(int argc, char **argv) {
  if (argc < 5 || std::string(argv[3]) != "--dp") {
    std::fprintf(stderr, "usage: partition-test-dp-program IN.ptp OUT.ptp "
                         "--dp N [--bucket-bytes B]\n");
    return 2;
  }
  int64_t dp = std::atoll(argv[4]);
  uint64_t bucketBytes = 256 * 1024;
  if (argc >= 7 && std::string(argv[5]) == "--bucket-bytes")
    bucketBytes = std::strtoull(argv[6], nullptr, 10);
  try {
    Program program = Program::load(argv[1]);
    testprograms::makeDataParallel(program, dp, bucketBytes);
    std::string bytes = testprograms::serializeProgram(program);
    // Loads again: the result must pass the loader's checks.
    Program::parse(reinterpret_cast<const uint8_t *>(bytes.data()),
                   bytes.size(), argv[2]);
    std::ofstream(argv[2], std::ios::binary) << bytes;
  } catch (const std::exception &error) {
    std::fprintf(stderr, "partition-test-dp-program: error: %s\n",
                 error.what());
    return 1;
  }
  return 0;
}
