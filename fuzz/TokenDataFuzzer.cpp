//===- TokenDataFuzzer.cpp - the token-data reader on arbitrary bytes -----===//
//
// A libFuzzer target for what partition-run does with --data / --text
// before it trains: readTokenFile (auto, llmc, raw, raw32, npy) or
// readTextFile, the vocabulary check, the train/eval split, a batch loader
// over the train part, a seek to a (fuzzed) checkpoint position, and a
// few batches. Any input may be rejected with a DataError; any other exception, a crash, a
// sanitizer report, or a result that breaks the reader's contract (a token
// count that disagrees with the file size, an id beyond the vocabulary
// after the check passed, a batch outside the range) is a bug.
//
// The input is 8 control bytes, then the file's bytes:
//   [0] format (auto, llmc, raw, raw32,  [1..2] vocabulary - 1 (LE uint16)
//       npy, text)
//   [3] batch - 1 (0..3)                 [4] sequence length - 1 (0..63)
//   [5] eval fraction * 256              [6..7] seek position (LE uint16)
// The file goes to an in-memory file (memfd) that the reader opens by path,
// as it would any file.
//
// Built like ProgramLoaderFuzzer.cpp: libFuzzer with ASan/UBSan where clang
// has it, and the deterministic StandaloneFuzzDriver.cpp always.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/BatchLoader.h"
#include "runtime/data/DataError.h"
#include "runtime/data/TokenData.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

using namespace partition::runtime::data;

namespace {

constexpr size_t kControlBytes = 8;

[[noreturn]] void bug(const char *what, const std::string &message) {
  std::fprintf(stderr, "TokenDataFuzzer: %s: %s\n", what, message.c_str());
  std::abort();
}

/// The in-memory file the reader opens, created once.
const std::string &memoryFilePath(int &fd) {
  static int descriptor = -1;
  static std::string path;
  if (descriptor < 0) {
    descriptor = memfd_create("token-data-fuzz", 0);
    if (descriptor < 0)
      bug("setup", "memfd_create failed");
    path = "/proc/self/fd/" + std::to_string(descriptor);
  }
  fd = descriptor;
  return path;
}

void writeFile(int fd, const uint8_t *data, size_t size) {
  if (ftruncate(fd, 0) != 0)
    bug("setup", "ftruncate failed");
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, off_t(done));
    if (n <= 0)
      bug("setup", "pwrite failed");
    done += size_t(n);
  }
}

void exercise(const uint8_t *data, size_t size) {
  if (size < kControlBytes)
    return;
  const Format formats[] = {Format::Auto,  Format::LlmC, Format::Raw,
                            Format::Raw32, Format::Npy,  Format::Text};
  Format format = formats[data[0] % 6];
  int64_t vocab = int64_t(data[1] | data[2] << 8) + 1;
  int64_t batch = 1 + data[3] % 4;
  int64_t seq = 1 + data[4] % 64;
  double evalFraction = data[5] / 256.0;
  int64_t seekTo = data[6] | data[7] << 8;
  const uint8_t *file = data + kControlBytes;
  const int64_t fileSize = int64_t(size - kControlBytes);

  int fd;
  const std::string &path = memoryFilePath(fd);
  writeFile(fd, file, size_t(fileSize));

  auto stream = std::make_shared<TokenStream>(
      format == Format::Text ? readTextFile(path) : readTokenFile(path, format));
  // The reader's contract: every byte of the file is accounted for.
  int64_t expected = -1;
  switch (stream->format) {
  case Format::Text:
    expected = fileSize;
    break;
  case Format::Raw:
    expected = fileSize / 2;
    if (fileSize % 2)
      bug("raw file of odd length accepted", std::to_string(fileSize));
    break;
  case Format::Raw32:
    expected = fileSize / 4;
    if (fileSize % 4)
      bug("raw32 file of a length not a multiple of 4 accepted",
          std::to_string(fileSize));
    break;
  case Format::LlmC:
  case Format::Npy:
    // A header, then every remaining byte is a token of the stream's width.
    expected = (fileSize - stream->headerBytes) / stream->bytesPerToken;
    if (fileSize != stream->headerBytes + stream->bytesPerToken * expected ||
        (stream->format == Format::LlmC &&
         stream->headerBytes != kLlmcHeaderBytes))
      bug("a header whose size disagrees with its count",
          std::to_string(fileSize));
    break;
  case Format::Auto:
    bug("the stream's format is auto", path);
  }
  if (stream->size() != expected || stream->size() == 0)
    bug("token count", std::to_string(stream->size()) + " tokens from " +
                           std::to_string(fileSize) + " bytes");

  validateVocab(*stream, vocab);
  for (uint32_t token : stream->tokens)
    if (token >= vocab)
      bug("an id beyond the vocabulary passed the check",
          std::to_string(token));

  Split split = splitTrainEval(stream, evalFraction);
  if (split.train.size() + split.eval.size() != stream->size())
    bug("the split loses tokens", std::to_string(split.train.size()));
  BatchLoader loader(split.train, batch, seq);
  try {
    loader.seek(seekTo, data[6] & 1);
  } catch (const DataError &) {
    // A checkpoint position beyond this range: rejected, keep going.
  }
  for (int i = 0; i < 3; ++i) {
    Batch next = loader.nextBatch();
    if (int64_t(next.inputs.size()) != batch * seq ||
        int64_t(next.targets.size()) != batch * seq)
      bug("batch of the wrong size", std::to_string(next.inputs.size()));
    for (int32_t id : next.inputs)
      if (id < 0 || id >= vocab)
        bug("batch id outside the vocabulary", std::to_string(id));
    if (loader.position() + batch * seq + 1 > split.train.size())
      bug("loader position leaves no room for a window",
          std::to_string(loader.position()));
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    exercise(data, size);
  } catch (const DataError &) {
    // A clean rejection.
  } catch (const std::exception &error) {
    bug("an exception other than DataError", error.what());
  } catch (...) {
    bug("a non-standard exception", "");
  }
  return 0;
}
