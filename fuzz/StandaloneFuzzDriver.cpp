//===- StandaloneFuzzDriver.cpp - libFuzzer's role without libFuzzer ------===//
//
//   partition-program-fuzz-replay [-runs=N] [-seed=S] CORPUS_DIR_OR_FILE...
//
// Runs LLVMFuzzerTestOneInput on every corpus file, then on N mutants of
// them made by a seeded generator (bit flips, byte sets to boundary values,
// overwritten little-endian integers, truncations, duplicated and deleted
// ranges), so the fuzz target is exercised by any compiler, deterministically.
// Prints a summary; a bug aborts inside the target.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Random.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

using partition::runtime::SplitMix64;

void mutate(Bytes &bytes, SplitMix64 &rng) {
  static const uint64_t kInteresting[] = {
      0, 1, 2, 3, 4, 7, 8, 16, 64, 127, 128, 255, 256, 4095, 4096, 65535,
      65536, 0x7fffffffULL, 0x80000000ULL, 0xffffffffULL,
      0x7fffffffffffffffULL, 0x8000000000000000ULL, ~uint64_t(0)};
  int changes = 1 + int(rng.below(4));
  for (int c = 0; c < changes && !bytes.empty(); ++c) {
    size_t at = rng.below(bytes.size());
    switch (rng.below(6)) {
    case 0: // flip a bit
      bytes[at] ^= uint8_t(1u << rng.below(8));
      break;
    case 1: // a random byte
      bytes[at] = uint8_t(rng.next());
      break;
    case 2: { // an interesting integer of 1, 2, 4 or 8 bytes
      uint64_t value =
          kInteresting[rng.below(sizeof(kInteresting) / sizeof(uint64_t))];
      size_t width = size_t(1) << rng.below(4);
      for (size_t i = 0; i < width && at + i < bytes.size(); ++i)
        bytes[at + i] = uint8_t(value >> (8 * i));
      break;
    }
    case 3: // add or subtract a little from a 32-bit word (offsets, sizes)
      if (at + 4 <= bytes.size()) {
        uint32_t word;
        std::memcpy(&word, &bytes[at], 4);
        word += uint32_t(int32_t(rng.below(33)) - 16);
        std::memcpy(&bytes[at], &word, 4);
      }
      break;
    case 4: // truncate
      bytes.resize(at);
      break;
    case 5: { // copy a range over another place
      size_t from = rng.below(bytes.size());
      size_t length = 1 + rng.below(64);
      for (size_t i = 0; i < length && from + i < bytes.size() &&
                         at + i < bytes.size();
           ++i)
        bytes[at + i] = bytes[from + i];
      break;
    }
    }
  }
}

bool readFile(const std::filesystem::path &path, Bytes &bytes) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return false;
  bytes.assign(std::istreambuf_iterator<char>(file),
               std::istreambuf_iterator<char>());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  long long runs = 10000;
  uint64_t seed = 1;
  std::vector<Bytes> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) {
      runs = std::atoll(arg.c_str() + 6);
      continue;
    }
    if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 6, nullptr, 10);
      continue;
    }
    if (arg.rfind("-", 0) == 0)
      continue; // other libFuzzer flags: ignored
    std::filesystem::path path(arg);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path)) {
      for (const auto &entry : std::filesystem::directory_iterator(path))
        if (entry.is_regular_file())
          files.push_back(entry.path());
    } else {
      files.push_back(path);
    }
    std::sort(files.begin(), files.end());
    for (const auto &file : files) {
      Bytes bytes;
      if (!readFile(file, bytes)) {
        std::fprintf(stderr, "cannot read %s\n", file.c_str());
        return 1;
      }
      corpus.push_back(std::move(bytes));
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "usage: %s [-runs=N] [-seed=S] CORPUS...\n", argv[0]);
    return 1;
  }
  for (const Bytes &input : corpus)
    LLVMFuzzerTestOneInput(input.data(), input.size());
  SplitMix64 rng{seed};
  for (long long run = 0; run < runs; ++run) {
    Bytes input = corpus[rng.below(corpus.size())];
    mutate(input, rng);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("replayed %zu corpus inputs and %lld mutants (seed %llu): no "
              "crash\n",
              corpus.size(), runs, static_cast<unsigned long long>(seed));
  return 0;
}
