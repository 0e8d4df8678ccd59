//===- DataTest.cpp - token files: formats, validation, vocabulary checks -===//

#include "runtime/data/BatchLoader.h"
#include "runtime/data/DataError.h"
#include "runtime/data/SyntheticLanguage.h"
#include "runtime/data/TokenData.h"
#include "unittests/runtime/DataTesting.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

using namespace partition::runtime::data;
using partition::runtime::data::testing::errorOf;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> int32Bytes(int32_t value) {
  const auto bits = static_cast<uint32_t>(value);
  return {static_cast<unsigned char>(bits), static_cast<unsigned char>(bits >> 8),
          static_cast<unsigned char>(bits >> 16),
          static_cast<unsigned char>(bits >> 24)};
}

/// The bytes of an llm.c shard, built by hand (not with writeLlmcFile).
std::vector<unsigned char> llmcBytes(int32_t magic, int32_t version,
                                     int32_t count,
                                     const std::vector<uint16_t> &tokens) {
  std::vector<unsigned char> bytes(1024, 0);
  auto put = [&](int index, int32_t value) {
    const auto word = int32Bytes(value);
    std::copy(word.begin(), word.end(), bytes.begin() + 4 * index);
  };
  put(0, magic);
  put(1, version);
  put(2, count);
  for (uint16_t token : tokens) {
    bytes.push_back(static_cast<unsigned char>(token));
    bytes.push_back(static_cast<unsigned char>(token >> 8));
  }
  return bytes;
}

std::vector<unsigned char> rawBytes(const std::vector<uint16_t> &tokens) {
  std::vector<unsigned char> bytes;
  for (uint16_t token : tokens) {
    bytes.push_back(static_cast<unsigned char>(token));
    bytes.push_back(static_cast<unsigned char>(token >> 8));
  }
  return bytes;
}

class DataFiles : public ::testing::Test {
protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir = fs::temp_directory_path() /
          ("partition-data-test-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir / "locked", fs::perms::owner_all, ec);
    fs::remove_all(dir, ec);
  }

  std::string write(const std::string &name,
                    const std::vector<unsigned char> &bytes) {
    const std::string path = (dir / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  std::string writeText(const std::string &name, const std::string &text) {
    return write(name, std::vector<unsigned char>(text.begin(), text.end()));
  }

  fs::path dir;
};

const std::vector<uint16_t> kTokens = {0, 1, 50256, 513, 65535, 7, 42};
/// Ids of a Llama 3 vocabulary (128256), beyond uint16.
const std::vector<uint32_t> kWideTokens = {0, 1, 128000, 65536, 128255, 7};

std::vector<uint32_t> wide(const std::vector<uint16_t> &tokens) {
  return {tokens.begin(), tokens.end()};
}

/// An llm.c shard of uint32 tokens (Llama 3's header), built by hand.
std::vector<unsigned char> llmc32Bytes(int32_t magic, int32_t version,
                                       int32_t count,
                                       const std::vector<uint32_t> &tokens) {
  std::vector<unsigned char> bytes = llmcBytes(magic, version, count, {});
  for (uint32_t token : tokens) {
    const auto word = int32Bytes(static_cast<int32_t>(token));
    bytes.insert(bytes.end(), word.begin(), word.end());
  }
  return bytes;
}

/// A version-1 .npy file: `header` (the dict) padded as numpy pads it,
/// then `data`.
std::vector<unsigned char> npyBytes(const std::string &header,
                                    const std::vector<unsigned char> &data) {
  std::string text = header;
  while ((10 + text.size() + 1) % 64 != 0)
    text += ' ';
  text += '\n';
  std::vector<unsigned char> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  bytes.push_back(static_cast<unsigned char>(text.size()));
  bytes.push_back(static_cast<unsigned char>(text.size() >> 8));
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::vector<unsigned char> uint32Bytes(const std::vector<uint32_t> &tokens) {
  std::vector<unsigned char> bytes;
  for (uint32_t token : tokens) {
    const auto word = int32Bytes(static_cast<int32_t>(token));
    bytes.insert(bytes.end(), word.begin(), word.end());
  }
  return bytes;
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

TEST_F(DataFiles, ReadsLlmcShard) {
  const std::string path =
      write("shard.bin", llmcBytes(20240520, 1, kTokens.size(), kTokens));
  for (Format format : {Format::Auto, Format::LlmC}) {
    const TokenStream stream = readTokenFile(path, format);
    EXPECT_EQ(stream.tokens, wide(kTokens));
    EXPECT_EQ(stream.format, Format::LlmC);
    EXPECT_EQ(stream.source, path);
    EXPECT_EQ(stream.headerBytes, 1024);
    EXPECT_EQ(stream.bytesPerToken, 2);
  }
}

TEST_F(DataFiles, ReadsRawUint16) {
  const std::string path = write("train.bin", rawBytes(kTokens));
  for (Format format : {Format::Auto, Format::Raw}) {
    const TokenStream stream = readTokenFile(path, format);
    EXPECT_EQ(stream.tokens, wide(kTokens));
    EXPECT_EQ(stream.format, Format::Raw);
    EXPECT_EQ(stream.headerBytes, 0);
  }
}

TEST_F(DataFiles, ForcedRawReadsAnLlmcHeaderAsTokens) {
  const std::string path =
      write("shard.bin", llmcBytes(20240520, 1, kTokens.size(), kTokens));
  const TokenStream stream = readTokenFile(path, Format::Raw);
  ASSERT_EQ(stream.size(), 512 + static_cast<int64_t>(kTokens.size()));
  EXPECT_EQ(stream.tokens[0], 20240520 & 0xffff);
  EXPECT_EQ(stream.tokens[1], 20240520 >> 16);
  EXPECT_EQ(stream.tokens[512], kTokens[0]);
}

TEST_F(DataFiles, WritersRoundTrip) {
  const std::string llmc = (dir / "w.llmc").string();
  const std::string raw = (dir / "w.raw").string();
  writeLlmcFile(llmc, kTokens);
  writeRawFile(raw, kTokens);
  EXPECT_EQ(fs::file_size(llmc), 1024 + 2 * kTokens.size());
  EXPECT_EQ(fs::file_size(raw), 2 * kTokens.size());
  EXPECT_EQ(readTokenFile(llmc).tokens, wide(kTokens));
  EXPECT_EQ(readTokenFile(llmc).format, Format::LlmC);
  EXPECT_EQ(readTokenFile(raw).tokens, wide(kTokens));
  EXPECT_EQ(readTokenFile(raw).format, Format::Raw);
  const std::string message =
      errorOf([&] { writeRawFile((dir / "no" / "such.bin").string(), kTokens); });
  EXPECT_CONTAINS(message, "such.bin");
}

TEST_F(DataFiles, ReadsTextAsBytes) {
  const std::string text = "h\xc3\xa9llo\n"; // "héllo\n" in UTF-8
  const std::string path = writeText("text.txt", text);
  for (const TokenStream &stream :
       {readTextFile(path), readTokenFile(path, Format::Text)}) {
    EXPECT_EQ(stream.tokens,
              (std::vector<uint32_t>{104, 0xc3, 0xa9, 108, 108, 111, 10}));
    EXPECT_EQ(stream.format, Format::Text);
    EXPECT_EQ(stream.bytesPerToken, 1);
    validateVocab(stream, kTextVocab);
  }
}

TEST_F(DataFiles, MissingFile) {
  const std::string path = (dir / "missing.bin").string();
  for (Format format : {Format::Auto, Format::LlmC, Format::Raw, Format::Text}) {
    const std::string message = errorOf([&] { readTokenFile(path, format); });
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "does not exist");
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

TEST_F(DataFiles, DirectoryIsNotAFile) {
  const std::string message =
      errorOf([&] { readTokenFile(dir.string()); });
  EXPECT_CONTAINS(message, dir.string());
  EXPECT_CONTAINS(message, "is a directory");
}

TEST_F(DataFiles, UnreadableFile) {
  const std::string path = write("locked", rawBytes(kTokens));
  fs::permissions(path, fs::perms::none);
  if (::access(path.c_str(), R_OK) == 0)
    GTEST_SKIP() << "running with privileges that ignore file permissions";
  const std::string message = errorOf([&] { readTokenFile(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "Permission denied");
}

TEST_F(DataFiles, TruncatedHeader) {
  std::vector<unsigned char> bytes = llmcBytes(20240520, 1, 3, {1, 2, 3});
  bytes.resize(100);
  const std::string path = write("short.bin", bytes);
  for (Format format : {Format::Auto, Format::LlmC}) {
    const std::string message = errorOf([&] { readTokenFile(path, format); });
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "truncated");
    EXPECT_CONTAINS(message, "needs 1024 bytes but the file has 100");
  }
  const std::string tiny = write("tiny.bin", {0x01, 0x02});
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(tiny, Format::LlmC); }),
                  "the file has 2");
}

TEST_F(DataFiles, TruncatedTokens) {
  // The header announces 10 tokens; the file holds 5.
  const std::string path =
      write("cut.bin", llmcBytes(20240520, 1, 10, {1, 2, 3, 4, 5}));
  const std::string message = errorOf([&] { readTokenFile(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "truncated");
  EXPECT_CONTAINS(message, "10 tokens (1044 bytes)");
  EXPECT_CONTAINS(message, "has 1034 bytes");
}

TEST_F(DataFiles, TrailingBytesAfterAnnouncedTokens) {
  const std::string path =
      write("long.bin", llmcBytes(20240520, 1, 2, {1, 2, 3, 4}));
  const std::string message = errorOf([&] { readTokenFile(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "need 1028 bytes but the file has 1032");
}

TEST_F(DataFiles, BadMagicWhenForcedToLlmc) {
  const std::string path =
      write("garbled.bin", llmcBytes(12345, 1, 3, {1, 2, 3}));
  const std::string message =
      errorOf([&] { readTokenFile(path, Format::LlmC); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "magic is 12345, expected 20240520");
  // Auto sees an llm.c header with another magic: reading it as raw uint16
  // would train on the header, so it is an error naming the magic.
  const std::string automatic =
      errorOf([&] { readTokenFile(path, Format::Auto); });
  EXPECT_CONTAINS(automatic, path);
  EXPECT_CONTAINS(automatic, "layout of an llm.c shard");
  EXPECT_CONTAINS(automatic, "magic is 12345, expected 20240520 (version 1)");
  EXPECT_CONTAINS(automatic, "pass format raw");
  // Asked for raw, the user gets the 512 + 3 tokens, header included.
  EXPECT_EQ(readTokenFile(path, Format::Raw).size(), 515);
}

TEST_F(DataFiles, AutoReadsRawFilesThatOnlyResembleAHeader) {
  // A bad magic and version alike, laid out as a shard: an error.
  const std::string both = write("both.bin", llmcBytes(7, 9, 2, {1, 2}));
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(both); }), "magic is 7");
  // The token count does not match the size: raw tokens.
  const std::string count = write("count.bin", llmcBytes(7, 1, 3, {1, 2}));
  EXPECT_EQ(readTokenFile(count).format, Format::Raw);
  // A reserved header word is not zero: raw tokens.
  std::vector<unsigned char> bytes = llmcBytes(7, 1, 2, {1, 2});
  bytes[1020] = 1;
  EXPECT_EQ(readTokenFile(write("reserved.bin", bytes)).format, Format::Raw);
  // Shorter than a header: raw tokens.
  EXPECT_EQ(readTokenFile(write("short.bin", {1, 0, 2, 0})).format,
            Format::Raw);
}

TEST_F(DataFiles, BadVersion) {
  const std::string path = write("v2.bin", llmcBytes(20240520, 2, 1, {7}));
  const std::string message = errorOf([&] { readTokenFile(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "version 2");
}

TEST_F(DataFiles, NegativeAndZeroCounts) {
  const std::string negative =
      write("neg.bin", llmcBytes(20240520, 1, -4, {}));
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(negative); }), "negative");
  const std::string zero = write("zero.bin", llmcBytes(20240520, 1, 0, {}));
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(zero); }), "no tokens");
}

TEST_F(DataFiles, OddRawLength) {
  const std::string path = write("odd.bin", {1, 0, 2, 0, 3});
  for (Format format : {Format::Auto, Format::Raw}) {
    const std::string message = errorOf([&] { readTokenFile(path, format); });
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "odd length of 5 bytes");
  }
}

TEST_F(DataFiles, EmptyFiles) {
  const std::string path = write("empty", {});
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(path); }), "is empty");
  const std::string text = errorOf([&] { readTextFile(path); });
  EXPECT_CONTAINS(text, "text file '" + path + "' is empty");
}

TEST_F(DataFiles, OutOfVocabularyIdNamesPositionAndFile) {
  std::vector<uint16_t> tokens = {1, 2, 3, 4, 5, 300, 6, 400};
  const std::string path =
      write("oov.bin", llmcBytes(20240520, 1, tokens.size(), tokens));
  const TokenStream stream = readTokenFile(path);
  const std::string message = errorOf([&] { validateVocab(stream, 256); });
  EXPECT_CONTAINS(message, "token id 300 at position 5 (byte offset 1034)");
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "vocabulary of 256");
  EXPECT_CONTAINS(errorOf([&] { validateVocab(stream, 301); }),
                  "token id 400 at position 7");
  validateVocab(stream, 401);
  validateVocab(stream, 100000);
  EXPECT_CONTAINS(errorOf([&] { validateVocab(stream, 0); }), "positive");

  const std::string raw = write("oov.raw", rawBytes(tokens));
  EXPECT_CONTAINS(errorOf([&] { validateVocab(readTokenFile(raw), 300); }),
                  "token id 300 at position 5 (byte offset 10)");
}

//===----------------------------------------------------------------------===//
// Tokens beyond uint16: llm.c's Llama 3 shards, raw uint32, .npy
//===----------------------------------------------------------------------===//

TEST_F(DataFiles, ReadsLlmc32Shard) {
  const std::string path = write(
      "llama.bin", llmc32Bytes(20240801, 7, kWideTokens.size(), kWideTokens));
  for (Format format : {Format::Auto, Format::LlmC}) {
    const TokenStream stream = readTokenFile(path, format);
    EXPECT_EQ(stream.tokens, kWideTokens);
    EXPECT_EQ(stream.format, Format::LlmC);
    EXPECT_EQ(stream.headerBytes, 1024);
    EXPECT_EQ(stream.bytesPerToken, 4);
    validateVocab(stream, 128256);
  }
  // Each magic has its version.
  const std::string v1 =
      write("v1.bin", llmc32Bytes(20240801, 1, 1, {70000}));
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(v1); }),
                  "has version 1, but only version 7 (uint32 tokens)");
  // Truncated: the count is of 4-byte tokens.
  const std::string cut =
      write("cut32.bin", llmc32Bytes(20240801, 7, 4, {1, 2, 3}));
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(cut); }),
                  "4 tokens (1040 bytes) but the file has 1036");
  // Auto refuses a 4-byte-token layout with another magic, as a 2-byte one.
  const std::string other =
      write("other32.bin", llmc32Bytes(20240802, 7, 2, {1, 2}));
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(other); }),
                  "layout of an llm.c shard");
}

TEST_F(DataFiles, ReadsRawUint32OnlyWhenAsked) {
  const std::string path = write("train32.bin", uint32Bytes(kWideTokens));
  const TokenStream stream = readTokenFile(path, Format::Raw32);
  EXPECT_EQ(stream.tokens, kWideTokens);
  EXPECT_EQ(stream.format, Format::Raw32);
  EXPECT_EQ(stream.bytesPerToken, 4);
  // Auto cannot tell uint32 from uint16 tokens: it reads uint16.
  EXPECT_EQ(readTokenFile(path).format, Format::Raw);
  const std::string odd = write("odd32.bin", {1, 0, 0, 0, 2, 0});
  EXPECT_CONTAINS(errorOf([&] { readTokenFile(odd, Format::Raw32); }),
                  "length of 6 bytes, not a multiple of 4");
}

TEST_F(DataFiles, OutOfVocabularyBeyondUint16) {
  std::vector<uint32_t> tokens = kWideTokens;
  tokens[4] = 128256;
  const std::string path =
      write("oov32.bin", llmc32Bytes(20240801, 7, tokens.size(), tokens));
  const std::string message =
      errorOf([&] { validateVocab(readTokenFile(path), 128256); });
  EXPECT_CONTAINS(message, "token id 128256 at position 4 (byte offset 1040) "
                           "of '" + path + "'");
  EXPECT_CONTAINS(message, "vocabulary of 128256");
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(DataFiles, WritersRoundTripUint32) {
  const std::string llmc = (dir / "w32.llmc").string();
  const std::string raw = (dir / "w32.raw").string();
  writeLlmcFile(llmc, kWideTokens);
  writeRawFile(raw, kWideTokens);
  EXPECT_EQ(fs::file_size(llmc), 1024 + 4 * kWideTokens.size());
  EXPECT_EQ(readTokenFile(llmc).tokens, kWideTokens);
  EXPECT_EQ(readTokenFile(raw, Format::Raw32).tokens, kWideTokens);
}

TEST_F(DataFiles, ReadsNpyArrays) {
  const std::string u2 = write(
      "u2.npy", npyBytes("{'descr': '<u2', 'fortran_order': False, "
                         "'shape': (7,), }",
                         rawBytes(kTokens)));
  const std::string u4 = write(
      "u4.npy", npyBytes("{'descr': '<u4', 'fortran_order': False, "
                         "'shape': (2, 3), }",
                         uint32Bytes(kWideTokens)));
  const std::string i4 = write(
      "i4.npy", npyBytes("{'descr': '<i4', 'fortran_order': False, "
                         "'shape': (6,), }",
                         uint32Bytes(kWideTokens)));
  for (Format format : {Format::Auto, Format::Npy}) {
    EXPECT_EQ(readTokenFile(u2, format).tokens, wide(kTokens));
    EXPECT_EQ(readTokenFile(u2, format).bytesPerToken, 2);
    EXPECT_EQ(readTokenFile(u4, format).tokens, kWideTokens);
    EXPECT_EQ(readTokenFile(i4, format).tokens, kWideTokens);
    EXPECT_EQ(readTokenFile(i4, format).format, Format::Npy);
  }
  // Byte offsets in messages count the header.
  const TokenStream stream = readTokenFile(u4);
  EXPECT_EQ(stream.headerBytes, 128);
  EXPECT_CONTAINS(errorOf([&] { validateVocab(stream, 128000); }),
                  "token id 128000 at position 2 (byte offset 136)");
}

TEST_F(DataFiles, RefusesBadNpyArrays) {
  auto npy = [&](const std::string &name, const std::string &header,
                 const std::vector<unsigned char> &data) {
    return errorOf([&] { readTokenFile(write(name, npyBytes(header, data))); });
  };
  std::vector<uint32_t> negative = {3, 4, 0xfffffffbu, 5};
  EXPECT_CONTAINS(npy("neg.npy",
                      "{'descr': '<i4', 'fortran_order': False, "
                      "'shape': (4,), }",
                      uint32Bytes(negative)),
                  "token id -5 at position 2 (byte offset 136)");
  EXPECT_CONTAINS(npy("f8.npy",
                      "{'descr': '<f8', 'fortran_order': False, "
                      "'shape': (1,), }",
                      std::vector<unsigned char>(8, 0)),
                  "holds dtype '<f8', not token ids");
  EXPECT_CONTAINS(npy("i8.npy",
                      "{'descr': '<i8', 'fortran_order': False, "
                      "'shape': (1,), }",
                      std::vector<unsigned char>(8, 0)),
                  "save uint16, uint32 or int32 ids");
  EXPECT_CONTAINS(npy("be.npy",
                      "{'descr': '>u4', 'fortran_order': False, "
                      "'shape': (1,), }",
                      std::vector<unsigned char>(4, 0)),
                  "big-endian");
  EXPECT_CONTAINS(npy("fortran.npy",
                      "{'descr': '<u2', 'fortran_order': True, "
                      "'shape': (2, 2), }",
                      std::vector<unsigned char>(8, 0)),
                  "Fortran-order");
  EXPECT_CONTAINS(npy("cut.npy",
                      "{'descr': '<u4', 'fortran_order': False, "
                      "'shape': (3,), }",
                      std::vector<unsigned char>(8, 0)),
                  "truncated: its header announces 3 tokens of 4 bytes");
  EXPECT_CONTAINS(npy("long.npy",
                      "{'descr': '<u2', 'fortran_order': False, "
                      "'shape': (1,), }",
                      std::vector<unsigned char>(4, 0)),
                  "longer than its header says");
  EXPECT_CONTAINS(npy("empty.npy",
                      "{'descr': '<u2', 'fortran_order': False, "
                      "'shape': (0,), }",
                      {}),
                  "holds no tokens");
  EXPECT_CONTAINS(npy("noshape.npy",
                      "{'descr': '<u2', 'fortran_order': False, }",
                      std::vector<unsigned char>(2, 0)),
                  "has no 'shape' in its header");
  // Forced npy on another file; a preamble cut short.
  EXPECT_CONTAINS(
      errorOf([&] { readTokenFile(write("raw.bin", rawBytes(kTokens)),
                                  Format::Npy); }),
      "is not an .npy array");
  EXPECT_CONTAINS(errorOf([&] {
                    readTokenFile(write("short.npy", {0x93, 'N', 'U', 'M',
                                                      'P', 'Y', 1, 0}));
                  }),
                  "truncated in its preamble");
}

TEST(DataFormat, ParsesNames) {
  EXPECT_EQ(parseFormat("auto"), Format::Auto);
  EXPECT_EQ(parseFormat("llmc"), Format::LlmC);
  EXPECT_EQ(parseFormat("llm.c"), Format::LlmC);
  EXPECT_EQ(parseFormat("raw"), Format::Raw);
  EXPECT_EQ(parseFormat("text"), Format::Text);
  EXPECT_EQ(formatName(Format::LlmC), "llmc");
  EXPECT_EQ(parseFormat("raw32"), Format::Raw32);
  EXPECT_EQ(parseFormat("npy"), Format::Npy);
  EXPECT_EQ(formatName(Format::Raw32), "raw32");
  EXPECT_EQ(formatName(Format::Npy), "npy");
  EXPECT_CONTAINS(errorOf([] { parseFormat("npz"); }),
                  "unknown token file format 'npz'; use one of auto, llmc, "
                  "raw, raw32, npy, text");
}

} // namespace
