//===- CheckpointTest.cpp - safetensors reader/writer and checkpoints -----===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/checkpoint/Crc32c.h"
#include "runtime/checkpoint/Safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace partition::runtime::checkpoint;
namespace fs = std::filesystem;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(value >> (8 * i));
  return bytes;
}

/// A file with header `json` (as is, unpadded) and data section `data`.
std::string rawFile(const std::string &json, const std::string &data) {
  return le64(json.size()) + json + data;
}

std::string floatBytes(std::vector<float> values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(float));
}

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        (fs::temp_directory_path() / "partition-checkpoint-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir = pattern;
  }
  void TearDown() override {
    std::error_code error;
    fs::remove_all(dir, error);
  }

  std::string path(const std::string &name) const {
    return (fs::path(dir) / name).string();
  }

  /// Files in the test directory whose name contains ".tmp.".
  std::vector<std::string> strayTemporaries() const {
    std::vector<std::string> found;
    for (const auto &entry : fs::recursive_directory_iterator(dir))
      if (entry.path().filename().string().find(".tmp.") != std::string::npos)
        found.push_back(entry.path().string());
    return found;
  }

  std::string dir;
};

/// Expects `action` to throw a one-line CheckpointError that names `file`
/// and contains `needle`.
template <typename Action>
void expectError(Action action, const std::string &file,
                 const std::string &needle) {
  try {
    action();
    ADD_FAILURE() << "no error; expected one containing \"" << needle << "\"";
  } catch (const CheckpointError &error) {
    std::string message = error.what();
    EXPECT_NE(message.find(file), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos)
        << "expected \"" << needle << "\" in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

void expectOpenError(const std::string &file, const std::string &needle) {
  expectError([&] { (void)Safetensors::open(file); }, file, needle);
}

// A small file used by the corruption tests: two tensors and metadata.
struct Sample {
  std::vector<float> weight{1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -0.5f};
  std::vector<int32_t> ids{7, -1, 42};
  std::vector<TensorRef> tensors() const {
    return {{"weight",
             DType::F32,
             {2, 3},
             weight.data(),
             weight.size() * sizeof(float)},
            {"ids", DType::I32, {3}, ids.data(), ids.size() * sizeof(int32_t)}};
  }
  Metadata metadata() const { return {{"step", "12"}, {"note", "sample"}}; }
};

//===----------------------------------------------------------------------===//
// Round trip and exact layout
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, RoundTripsTensorsAndMetadata) {
  std::vector<float> wte{0.f, 1.f, 2.f, 3.f, 4.f, 5.f};
  int64_t counter = -1234567890123;
  std::vector<int32_t> ids{1, 2, 3, 4};
  std::vector<uint16_t> bf16{0x3f80, 0x4000};
  std::vector<uint8_t> odd{9, 8, 7};
  std::string oddName = "we\"ird\nname/\xc3\xa9";
  std::vector<TensorRef> tensors = {
      {"wte", DType::F32, {3, 2}, wte.data(), 24},
      {"counter", DType::I64, {}, &counter, 8},
      {"empty", DType::F32, {0, 4}, nullptr, 0},
      {"ids", DType::I32, {4}, ids.data(), 16},
      {"h.0.w", DType::BF16, {2}, bf16.data(), 4},
      {oddName, DType::U8, {1, 3}, odd.data(), 3},
  };
  Metadata metadata = {{"format", "pt"}, {"note", "h\xc3\xa9llo \"x\""}};
  std::string file = path("round.safetensors");
  writeSafetensors(file, tensors, metadata);

  Safetensors st = Safetensors::open(file);
  std::vector<std::string> expectedNames = {"wte", "counter", "empty",
                                            "ids", "h.0.w",   oddName};
  EXPECT_EQ(st.names(), expectedNames);
  EXPECT_EQ(st.metadata(), metadata);
  EXPECT_EQ(st.metadata("format"), "pt");
  EXPECT_TRUE(st.contains("ids"));
  EXPECT_FALSE(st.contains("nope"));

  const TensorInfo &info = st.info("wte");
  EXPECT_EQ(info.dtype, DType::F32);
  EXPECT_EQ(info.shape, (Shape{3, 2}));
  EXPECT_EQ(info.begin, 0u);
  EXPECT_EQ(info.end, 24u);
  EXPECT_EQ(info.elements(), 6);
  EXPECT_EQ(st.info("counter").begin, 24u);
  EXPECT_EQ(st.info("counter").elements(), 1);
  EXPECT_EQ(st.info("empty").bytes(), 0u);

  std::vector<float> wteBack(6);
  st.read("wte", DType::F32, {3, 2}, wteBack.data(), 24);
  EXPECT_EQ(wteBack, wte);
  int64_t counterBack = 0;
  st.read("counter", DType::I64, {}, &counterBack, 8);
  EXPECT_EQ(counterBack, counter);
  st.read("empty", DType::F32, {0, 4}, nullptr, 0);
  std::vector<int32_t> idsBack(4);
  st.readRaw("ids", idsBack.data(), 16);
  EXPECT_EQ(idsBack, ids);
  std::vector<uint16_t> bf16Back(2);
  st.read("h.0.w", DType::BF16, {2}, bf16Back.data(), 4);
  EXPECT_EQ(bf16Back, bf16);
  std::vector<uint8_t> oddBack(3);
  st.read(oddName, DType::U8, {1, 3}, oddBack.data(), 3);
  EXPECT_EQ(oddBack, odd);

  // A slice: the second row of wte.
  float row[2];
  st.readBytes("wte", 8, row, 8);
  EXPECT_EQ(row[0], 2.f);
  EXPECT_EQ(row[1], 3.f);

  // Moving keeps the file readable.
  Safetensors moved = std::move(st);
  int32_t firstId = 0;
  moved.readBytes("ids", 0, &firstId, 4);
  EXPECT_EQ(firstId, 1);
  EXPECT_TRUE(strayTemporaries().empty());
}

TEST_F(CheckpointTest, WritesTheExactByteLayout) {
  std::vector<float> a{1.0f, 2.0f};
  std::string file = path("tiny.safetensors");
  writeSafetensors(file, {{"a", DType::F32, {2}, a.data(), 8}});

  // 54 bytes of compact JSON, padded with 2 spaces to 56 (a multiple of 8).
  std::string json =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(json.size(), 54u);
  std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) + json + "  " +
                         std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  EXPECT_EQ(expected.size(), 72u);
  EXPECT_EQ(readFile(file), expected);
}

TEST_F(CheckpointTest, WritesMetadataFirstAndKeepsTheGivenOrder) {
  int32_t x = 0x01020304;
  uint8_t b[3] = {0xaa, 0xbb, 0xcc};
  std::string file = path("order.safetensors");
  // "x" before "b": the order given, not sorted by name.
  writeSafetensors(file,
                   {{"x", DType::I32, {}, &x, 4}, {"b", DType::U8, {3}, b, 3}},
                   {{"k", "v"}});
  std::string json =
      R"({"__metadata__":{"k":"v"},"x":{"dtype":"I32","shape":[],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[4,7]}})";
  ASSERT_EQ(json.size(), 130u);
  // 130 + 6 spaces = 136 = 0x88.
  std::string expected = std::string("\x88\0\0\0\0\0\0\0", 8) + json +
                         std::string(6, ' ') +
                         std::string("\x04\x03\x02\x01\xaa\xbb\xcc", 7);
  EXPECT_EQ(expected.size(), 151u);
  EXPECT_EQ(readFile(file), expected);
}

TEST_F(CheckpointTest, WritesAnEmptyFile) {
  std::string file = path("empty.safetensors");
  writeSafetensors(file, {});
  EXPECT_EQ(readFile(file), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  Safetensors st = Safetensors::open(file);
  EXPECT_TRUE(st.names().empty());
  EXPECT_TRUE(st.metadata().empty());
}

//===----------------------------------------------------------------------===//
// Reading corrupt files
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, RejectsAMissingFileOrADirectory) {
  expectOpenError(path("absent.safetensors"), "no such file");
  expectOpenError(dir, "is a directory");
}

TEST_F(CheckpointTest, RejectsEveryTruncation) {
  Sample sample;
  std::string file = path("whole.safetensors");
  writeSafetensors(file, sample.tensors(), sample.metadata());
  const std::string whole = readFile(file);
  // The data section is the last 24 + 12 bytes.
  const size_t headerEnd = whole.size() - 36;

  std::string cut = path("cut.safetensors");
  for (size_t size = 0; size < whole.size(); ++size) {
    SCOPED_TRACE("truncated to " + std::to_string(size) + " bytes");
    writeFile(cut, whole.substr(0, size));
    if (size < 8)
      expectOpenError(cut, "shorter than the 8-byte header length");
    else if (size < headerEnd)
      expectOpenError(cut, "runs past the end of the file");
    else
      expectOpenError(cut, "truncated");
  }
}

TEST_F(CheckpointTest, CorruptHeaderBytesNeverCrash) {
  Sample sample;
  std::string file = path("whole.safetensors");
  writeSafetensors(file, sample.tensors(), sample.metadata());
  const std::string whole = readFile(file);
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(static_cast<unsigned char>(whole[i])) << (8 * i);

  std::string bad = path("bad.safetensors");
  int rejected = 0, accepted = 0;
  for (size_t at = 0; at < 8 + headerBytes; ++at) {
    for (char replacement : {'x', '}', '"', '9', '\0', '\xff', '['}) {
      if (whole[at] == replacement)
        continue;
      std::string bytes = whole;
      bytes[at] = replacement;
      writeFile(bad, bytes);
      try {
        Safetensors st = Safetensors::open(bad);
        // Accepted: then every tensor must be readable.
        for (const std::string &name : st.names()) {
          std::vector<char> buffer(st.info(name).bytes());
          st.readRaw(name, buffer.data(), buffer.size());
        }
        ++accepted;
      } catch (const CheckpointError &error) {
        EXPECT_NE(std::string(error.what()).find(bad), std::string::npos);
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 0);
  // Some edits are harmless (a digit in a metadata value, say).
  EXPECT_GT(accepted, 0);
}

struct CorruptCase {
  const char *label;
  std::string file;
  const char *needle;
};

TEST_F(CheckpointTest, RejectsEachKindOfCorruptHeader) {
  const std::string f8 = floatBytes({1, 2});
  const std::string f16 = floatBytes({1, 2, 3, 4});
  std::string tooLong = le64(1000) + "{}";
  std::string huge = le64(std::numeric_limits<uint64_t>::max()) + "{}      ";
  std::vector<CorruptCase> cases = {
      {"header too long", tooLong, "runs past the end of the file"},
      {"header length 2^64-1", huge, "runs past the end of the file"},
      {"empty header", rawFile("", ""), "not a JSON object"},
      {"array header", rawFile("[]", ""), "not a JSON object"},
      {"truncated JSON", rawFile(R"({"a":{"dtype":"F32")", ""),
       "not valid JSON"},
      {"trailing garbage", rawFile(R"({} x)", ""), "not valid JSON"},
      {"invalid UTF-8", rawFile("{\"\xff\":1}", ""), "not valid JSON"},
      {"duplicate tensor",
       rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
               f16),
       "key \"a\" twice"},
      {"deep nesting",
       rawFile("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}",
               ""),
       "nests JSON deeper"},
      {"entry not an object", rawFile(R"({"a":5})", ""),
       "tensor \"a\" is a number"},
      {"missing dtype",
       rawFile(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", f8),
       "has no \"dtype\""},
      {"missing shape",
       rawFile(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", f8),
       "has no \"shape\""},
      {"missing data_offsets",
       rawFile(R"({"a":{"dtype":"F32","shape":[2]}})", f8),
       "has no \"data_offsets\""},
      {"dtype not a string",
       rawFile(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", f8),
       "dtype that is a number"},
      {"unknown dtype",
       rawFile(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", f8),
       "dtype \"F33\""},
      {"shape not an array",
       rawFile(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", f8),
       "shape that is a number"},
      {"negative dimension",
       rawFile(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
               f8),
       "non-negative integer"},
      {"fractional dimension",
       rawFile(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})",
               f8),
       "non-negative integer"},
      {"three offsets",
       rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})",
               f8),
       "not [begin, end]"},
      {"negative offset",
       rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})",
               f8),
       "not [begin, end]"},
      {"offsets backwards",
       rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f8),
       "end before they begin"},
      {"size mismatch",
       rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
               f8.substr(0, 4)),
       "span 4 bytes"},
      {"overflowing shape",
       rawFile(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
               R"("data_offsets":[0,8]}})",
               f8),
       "too large"},
      {"overlap",
       rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               f16.substr(0, 12)),
       "overlaps tensor \"a\""},
      {"gap",
       rawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
               f16),
       "bytes [4, 8) of the data section belong to no tensor"},
      {"beyond the data section",
       rawFile(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
               f8),
       "truncated"},
      {"far beyond the data section",
       rawFile(
           R"({"a":{"dtype":"U8","shape":[8],)"
           R"("data_offsets":[18446744073709551600,18446744073709551608]}})",
           f8),
       "belong to no tensor"},
      {"trailing data",
       rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
               f16),
       "cover only 8"},
      {"metadata not an object", rawFile(R"({"__metadata__":[]})", ""),
       "\"__metadata__\" is an array"},
      {"metadata value not a string",
       rawFile(R"({"__metadata__":{"step":3}})", ""),
       "metadata \"step\" is a number"},
  };
  std::string file = path("corrupt.safetensors");
  for (const CorruptCase &c : cases) {
    SCOPED_TRACE(c.label);
    writeFile(file, c.file);
    expectOpenError(file, c.needle);
  }
}

TEST_F(CheckpointTest, ReadChecksWhatTheCallerExpects) {
  Sample sample;
  std::string file = path("sample.safetensors");
  writeSafetensors(file, sample.tensors(), sample.metadata());
  Safetensors st = Safetensors::open(file);
  float weight[6];
  int32_t ids[3];

  expectError([&] { st.read("bias", DType::F32, {3}, weight, 12); }, file,
              "no tensor \"bias\" (the file holds 2 tensors: \"weight\", "
              "\"ids\")");
  expectError([&] { (void)st.info("bias"); }, file, "no tensor \"bias\"");
  expectError([&] { st.read("ids", DType::I64, {3}, ids, 12); }, file,
              "tensor \"ids\" is I32[3] but the caller expects I64[3]");
  expectError(
      [&] {
        st.read("weight", DType::F32, {3, 2}, weight, 24);
      },
      file, "is F32[2, 3] but the caller expects F32[3, 2]");
  expectError(
      [&] {
        st.read("weight", DType::F32, {2, 3}, weight, 20);
      },
      file, "24 bytes, but the destination holds 20");
  expectError([&] { st.readRaw("ids", ids, 16); }, file,
              "the destination holds 16");
  expectError([&] { st.readBytes("ids", 8, ids, 8); }, file,
              "bytes [8, 16) lie outside tensor \"ids\"");
  expectError([&] { (void)st.metadata("seed"); }, file, "no metadata \"seed\"");

  st.read("weight", DType::F32, {2, 3}, weight, 24);
  EXPECT_EQ(std::vector<float>(weight, weight + 6), sample.weight);
}

TEST_F(CheckpointTest, NoticesAFileTruncatedAfterOpen) {
  Sample sample;
  std::string file = path("sample.safetensors");
  writeSafetensors(file, sample.tensors(), sample.metadata());
  Safetensors st = Safetensors::open(file);
  fs::resize_file(file, fs::file_size(file) - 4);
  int32_t ids[3];
  expectError([&] { st.readRaw("ids", ids, 12); }, file, "ended early");
}

//===----------------------------------------------------------------------===//
// Writing: validation and atomicity
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, WriterRejectsBadTensorsBeforeTouchingTheFile) {
  std::string file = path("keep.safetensors");
  writeFile(file, "previous content");
  float data[4] = {1, 2, 3, 4};
  struct BadCase {
    const char *label;
    std::vector<TensorRef> tensors;
    Metadata metadata;
    const char *needle;
  };
  std::vector<BadCase> cases = {
      {"size", {{"a", DType::F32, {3}, data, 16}}, {}, "12 bytes) but 16"},
      {"duplicate",
       {{"a", DType::F32, {1}, data, 4}, {"a", DType::F32, {1}, data, 4}},
       {},
       "given twice"},
      {"reserved",
       {{"__metadata__", DType::F32, {1}, data, 4}},
       {},
       "reserved"},
      {"empty name", {{"", DType::F32, {1}, data, 4}}, {}, "empty name"},
      {"negative dim",
       {{"a", DType::F32, {-1}, data, 4}},
       {},
       "negative dimension"},
      {"null data", {{"a", DType::F32, {1}, nullptr, 4}}, {}, "no data"},
      {"bad UTF-8 name",
       {{"a\xff", DType::F32, {1}, data, 4}},
       {},
       "not valid UTF-8"},
      {"bad UTF-8 metadata", {}, {{"k", "\xc3"}}, "not valid UTF-8"},
  };
  for (const BadCase &c : cases) {
    SCOPED_TRACE(c.label);
    expectError([&] { writeSafetensors(file, c.tensors, c.metadata); }, file,
                c.needle);
    EXPECT_EQ(readFile(file), "previous content");
  }
  EXPECT_TRUE(strayTemporaries().empty());
}

TEST_F(CheckpointTest, AbandonedAtomicFileLeavesTheOldFile) {
  std::string file = path("state.bin");
  writeFile(file, "old");
  try {
    AtomicFile out(file);
    out.write("new, half", 9);
    EXPECT_TRUE(fs::exists(out.temporaryPath()));
    EXPECT_EQ(fs::path(out.temporaryPath()).parent_path(), fs::path(dir));
    throw std::runtime_error("writer failed");
  } catch (const std::runtime_error &) {
  }
  EXPECT_EQ(readFile(file), "old");
  EXPECT_TRUE(strayTemporaries().empty());

  AtomicFile out(file);
  out.write("new", 3);
  EXPECT_EQ(readFile(file), "old");
  out.commit();
  EXPECT_EQ(readFile(file), "new");
  EXPECT_TRUE(strayTemporaries().empty());
  expectError([&] { out.write("x", 1); }, file, "already committed");
}

TEST_F(CheckpointTest, FailedRenameCleansUp) {
  // The target is a non-empty directory: the rename fails after writing.
  std::string target = path("occupied");
  fs::create_directories(fs::path(target) / "inside");
  Sample sample;
  expectError([&] { writeSafetensors(target, sample.tensors()); }, target,
              "cannot rename");
  EXPECT_TRUE(fs::is_directory(target));
  EXPECT_TRUE(strayTemporaries().empty());
}

TEST_F(CheckpointTest, MissingDirectoryIsAnError) {
  std::string file = path("no/such/dir/x.safetensors");
  Sample sample;
  expectError([&] { writeSafetensors(file, sample.tensors()); }, file,
              "cannot create a temporary file");
}

TEST_F(CheckpointTest, FullDiskLeavesTheOldCheckpoint) {
  // RLIMIT_FSIZE makes every write past 4 KiB fail with EFBIG, as a full
  // disk would fail with ENOSPC, halfway through the new file.
  std::string file = path("model.safetensors");
  Sample sample;
  writeSafetensors(file, sample.tensors(), sample.metadata());
  const std::string old = readFile(file);
  std::vector<float> big(16384, 1.0f);

  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*savedHandler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = saved;
  limited.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  try {
    writeSafetensors(
        file,
        {{"big", DType::F32, {16384}, big.data(), big.size() * sizeof(float)}});
  } catch (const CheckpointError &error) {
    message = error.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, savedHandler);

  EXPECT_NE(message.find("write failed"), std::string::npos) << message;
  EXPECT_NE(message.find("the previous file, if any, is unchanged"),
            std::string::npos)
      << message;
  EXPECT_EQ(readFile(file), old);
  EXPECT_TRUE(strayTemporaries().empty());
  EXPECT_EQ(Safetensors::open(file).names().size(), 2u);
}

//===----------------------------------------------------------------------===//
// Checkpoint directories
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, SavesAndOpensACheckpointDirectory) {
  std::vector<float> w{1, 2, 3, 4}, m{0.1f, 0.2f, 0.3f, 0.4f},
      v{0.01f, 0.02f, 0.03f, 0.04f};
  std::vector<TensorRef> tensors = {
      {"wte", DType::F32, {2, 2}, w.data(), 16},
      {adamMName("wte"), DType::F32, {2, 2}, m.data(), 16},
      {adamVName("wte"), DType::F32, {2, 2}, v.data(), 16},
  };
  TrainingState state;
  state.step = 1000;
  state.dataPosition = 123456789012;
  state.seed = std::numeric_limits<uint64_t>::max();
  std::string ckpt = path("runs/a/step-1000");
  saveCheckpoint(ckpt, tensors, state, {{"plan", "dp=2"}});
  EXPECT_TRUE(fs::is_regular_file(fs::path(ckpt) / "checkpoint.safetensors"));
  EXPECT_EQ(checkpointFile(ckpt), ckpt + "/checkpoint.safetensors");

  Checkpoint loaded = openCheckpoint(ckpt);
  EXPECT_EQ(loaded.state.step, 1000);
  EXPECT_EQ(loaded.state.dataPosition, 123456789012);
  EXPECT_EQ(loaded.state.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(loaded.tensors.names(),
            (std::vector<std::string>{"wte", "wte.adam_m", "wte.adam_v"}));
  EXPECT_EQ(loaded.tensors.metadata("plan"), "dp=2");
  EXPECT_EQ(loaded.tensors.metadata("checkpoint_version"), "2");
  EXPECT_TRUE(loaded.checksummed());
  EXPECT_EQ(loaded.tensors.metadata("step"), "1000");
  std::vector<float> back(4);
  loaded.tensors.read("wte.adam_v", DType::F32, {2, 2}, back.data(), 16);
  EXPECT_EQ(back, v);

  // Saving again replaces the checkpoint whole.
  state.step = 1001;
  saveCheckpoint(ckpt, {tensors[0]}, state);
  Checkpoint again = openCheckpoint(ckpt);
  EXPECT_EQ(again.state.step, 1001);
  EXPECT_EQ(again.tensors.names(), (std::vector<std::string>{"wte"}));
  EXPECT_TRUE(strayTemporaries().empty());
}

TEST_F(CheckpointTest, CheckpointErrors) {
  std::string ckpt = path("ckpt");
  expectError([&] { (void)openCheckpoint(ckpt); }, ckpt, "no such directory");
  fs::create_directories(ckpt);
  expectError([&] { (void)openCheckpoint(ckpt); }, checkpointFile(ckpt),
              "no such file");

  expectError(
      [&] {
        saveCheckpoint(ckpt, {}, {}, {{"step", "9"}});
      },
      checkpointFile(ckpt), "reserved key \"step\"");

  std::string notADir = path("plain-file");
  writeFile(notADir, "x");
  expectError([&] { saveCheckpoint(notADir, {}, {}); }, notADir,
              "cannot create checkpoint directory");

  // Metadata the loader cannot parse.
  writeSafetensors(checkpointFile(ckpt), {},
                   {{"checkpoint_version", "1"},
                    {"step", "12x"},
                    {"data_position", "0"},
                    {"seed", "0"}});
  expectError([&] { (void)openCheckpoint(ckpt); }, checkpointFile(ckpt),
              "metadata \"step\" is \"12x\", not a decimal integer");
  writeSafetensors(checkpointFile(ckpt), {},
                   {{"checkpoint_version", "3"},
                    {"step", "1"},
                    {"data_position", "0"},
                    {"seed", "0"}});
  expectError([&] { (void)openCheckpoint(ckpt); }, checkpointFile(ckpt),
              "checkpoint_version is 3 but this runtime reads 1 to 2");
  writeSafetensors(checkpointFile(ckpt), {},
                   {{"checkpoint_version", "1"},
                    {"step", "-1"},
                    {"data_position", "0"},
                    {"seed", "0"}});
  expectError([&] { (void)openCheckpoint(ckpt); }, checkpointFile(ckpt),
              "metadata \"step\" is negative");
  writeSafetensors(checkpointFile(ckpt), {}, {});
  expectError([&] { (void)openCheckpoint(ckpt); }, checkpointFile(ckpt),
              "no metadata \"checkpoint_version\"");
}

//===----------------------------------------------------------------------===//
// Checksums, the model a checkpoint belongs to, non-finite values
//===----------------------------------------------------------------------===//

TEST(Crc32cTest, MatchesTheStandardCheckValues) {
  // The CRC catalogue's check value, and RFC 3720's (iSCSI) test vectors.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0').data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff').data(), 32), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i)
    ascending[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending.data(), 32), 0x46DD794Eu);
}

TEST(Crc32cTest, AgreesWithTheBitwiseDefinitionAtEveryLengthAndSplit) {
  // The slicing-by-8 loop against the textbook bit-at-a-time CRC, over
  // lengths and start offsets that leave every remainder mod 8.
  auto bitwise = [](const unsigned char *p, size_t n) {
    uint32_t crc = ~0u;
    for (size_t i = 0; i < n; ++i) {
      crc ^= p[i];
      for (int bit = 0; bit < 8; ++bit)
        crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
  };
  std::vector<unsigned char> bytes(100);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t start = 0; start < 8; ++start)
    for (size_t n = 0; start + n <= bytes.size(); ++n) {
      uint32_t expected = bitwise(bytes.data() + start, n);
      ASSERT_EQ(crc32c(bytes.data() + start, n), expected) << start << "+" << n;
      size_t half = n / 3;
      ASSERT_EQ(crc32c(bytes.data() + start + half, n - half,
                       crc32c(bytes.data() + start, half)),
                expected);
    }
}

/// A checkpoint of one parameter and its two moments, as partition-run
/// writes one.
struct SmallCheckpoint {
  std::vector<float> wte{0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -4.0f, 8.0f, 1.0f};
  std::vector<float> m = std::vector<float>(8, 0.125f);
  std::vector<float> v = std::vector<float>(8, 0.0625f);
  std::string model = R"({"arch":"gpt2","batch":4,"layers":2,"seq_len":64})";

  std::vector<TensorRef> tensors() const {
    return {{"wte", DType::F32, {4, 2}, wte.data(), 32},
            {adamMName("wte"), DType::F32, {4, 2}, m.data(), 32},
            {adamVName("wte"), DType::F32, {4, 2}, v.data(), 32}};
  }
  std::vector<ExpectedTensor> expected() const {
    return {{"wte", DType::F32, {4, 2}},
            {"wte.adam_m", DType::F32, {4, 2}},
            {"wte.adam_v", DType::F32, {4, 2}}};
  }
  void save(const std::string &dir) const {
    TrainingState state;
    state.step = 3;
    saveCheckpoint(dir, tensors(), state, {{"model", model}});
  }
};

/// `metadata` with "crc32c:__metadata__" set as the format defines it
/// (written out here independently of Checkpoint.cpp).
Metadata sealed(Metadata metadata) {
  metadata.erase("crc32c:__metadata__");
  std::string bytes;
  for (const auto &[key, value] : metadata)
    bytes += key + '\0' + value + '\0';
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", crc32c(bytes.data(), bytes.size()));
  metadata["crc32c:__metadata__"] = hex;
  return metadata;
}

/// Writes `tensors` as a version 2 checkpoint in `dir` with valid checksums
/// but without saveCheckpoint's value checks: what an edited or damaged
/// file holds.
void writeUnchecked(const std::string &dir,
                    const std::vector<TensorRef> &tensors) {
  Metadata metadata{{"checkpoint_version", "2"},
                    {"step", "3"},
                    {"data_position", "0"},
                    {"seed", "0"}};
  for (const TensorRef &tensor : tensors) {
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", crc32c(tensor.data, tensor.bytes));
    metadata["crc32c:" + tensor.name] = hex;
  }
  fs::create_directories(dir);
  writeSafetensors(checkpointFile(dir), tensors, sealed(metadata));
}

/// Reads every tensor of `checkpoint` through Checkpoint::read.
void readAll(const Checkpoint &checkpoint) {
  for (const std::string &name : checkpoint.tensors.names()) {
    const TensorInfo &info = checkpoint.tensors.info(name);
    std::vector<char> bytes(info.bytes());
    checkpoint.read(name, info.dtype, info.shape, bytes.data(), bytes.size());
  }
}

/// Where tensor `name`'s bytes start in `file`.
uint64_t dataOffset(const std::string &file, const std::string &name) {
  std::string bytes = readFile(file);
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i)
    header |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return 8 + header + Safetensors::open(file).info(name).begin;
}

TEST_F(CheckpointTest, StoresACrc32cPerTensorInTheMetadata) {
  SmallCheckpoint sample;
  std::string ckpt = path("ckpt");
  sample.save(ckpt);
  Checkpoint loaded = openCheckpoint(ckpt);
  EXPECT_EQ(loaded.version, 2);
  char expected[9];
  std::snprintf(expected, sizeof(expected), "%08x",
                crc32c(sample.wte.data(), 32));
  EXPECT_EQ(loaded.tensors.metadata("crc32c:wte"), expected);
  EXPECT_EQ(loaded.tensors.metadata().count("crc32c:wte.adam_m"), 1u);
  EXPECT_EQ(loaded.tensors.metadata().count("crc32c:wte.adam_v"), 1u);
  EXPECT_EQ(sealed(loaded.tensors.metadata()), loaded.tensors.metadata());
  std::vector<float> back(8);
  loaded.read("wte", DType::F32, {4, 2}, back.data(), 32);
  EXPECT_EQ(back, sample.wte);
  readAll(loaded);

  expectError(
      [&] {
        saveCheckpoint(ckpt, sample.tensors(), {}, {{"crc32c:x", "0"}});
      },
      checkpointFile(ckpt), "reserved prefix \"crc32c:\"");
}

TEST_F(CheckpointTest, SixteenFlippedBytesInAnyTensorFailItsChecksum) {
  SmallCheckpoint sample;
  std::string ckpt = path("ckpt");
  sample.save(ckpt);
  std::string file = checkpointFile(ckpt);
  const std::string good = readFile(file);
  for (const char *tensor : {"wte", "wte.adam_m", "wte.adam_v"}) {
    SCOPED_TRACE(tensor);
    std::string bad = good;
    uint64_t at = dataOffset(file, tensor) + 8;
    for (int i = 0; i < 16; ++i)
      bad[at + i] = static_cast<char>(~bad[at + i]);
    writeFile(file, bad);
    // The file is still a well-formed safetensors file: only the checksum
    // notices.
    Checkpoint loaded = openCheckpoint(ckpt);
    expectError([&] { readAll(loaded); }, file,
                "tensor \"" + std::string(tensor) + "\" fails its checksum");
  }
  // A single flipped bit, too.
  std::string bad = good;
  bad[dataOffset(file, "wte.adam_v") + 31] ^= 1;
  writeFile(file, bad);
  expectError([&] { readAll(openCheckpoint(ckpt)); }, file,
              "tensor \"wte.adam_v\" fails its checksum");
}

TEST_F(CheckpointTest, RejectsMissingMalformedOrOrphanChecksums) {
  SmallCheckpoint sample;
  std::string ckpt = path("ckpt");
  fs::create_directories(ckpt);
  std::string file = checkpointFile(ckpt);
  auto hex = [](const std::vector<float> &values) {
    char text[9];
    std::snprintf(text, sizeof(text), "%08x",
                  crc32c(values.data(), values.size() * sizeof(float)));
    return std::string(text);
  };
  Metadata base = {{"checkpoint_version", "2"},
                   {"step", "1"},
                   {"data_position", "0"},
                   {"seed", "0"},
                   {"crc32c:wte", hex(sample.wte)},
                   {"crc32c:wte.adam_m", hex(sample.m)},
                   {"crc32c:wte.adam_v", hex(sample.v)}};
  struct Case {
    const char *label;
    std::string key, value; // value "": the key is removed
    std::string needle;
    bool seal = true;
  } cases[] = {
      {"no metadata checksum", "crc32c:__metadata__", "",
       "the metadata checksum \"crc32c:__metadata__\" is missing", false},
      {"malformed metadata checksum", "crc32c:__metadata__", "zz",
       "the metadata checksum \"crc32c:__metadata__\" is \"zz\", not 8 "
       "lowercase hex digits",
       false},
      {"an edited step", "step", "2",
       "the metadata (step, data position, model, checksums) fails its "
       "checksum",
       false},
      {"an edited tensor checksum", "crc32c:wte", "12345678",
       "the metadata (step, data position, model, checksums) fails its "
       "checksum",
       false},
      {"missing", "crc32c:wte.adam_m", "",
       "tensor \"wte.adam_m\" has no checksum"},
      {"upper case", "crc32c:wte", "ABCDEF01",
       "the checksum of tensor \"wte\" is \"ABCDEF01\", not 8 lowercase hex"},
      {"short", "crc32c:wte", "1234", "not 8 lowercase hex digits"},
      {"orphan", "crc32c:wpe", "00000000",
       "metadata \"crc32c:wpe\" is the checksum of a tensor the file does "
       "not hold"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.label);
    Metadata metadata = sealed(base);
    if (c.value.empty())
      metadata.erase(c.key);
    else
      metadata[c.key] = c.value;
    if (c.seal)
      metadata = sealed(metadata);
    writeSafetensors(file, sample.tensors(), metadata);
    expectError([&] { (void)openCheckpoint(ckpt); }, file, c.needle);
  }
  writeSafetensors(file, sample.tensors(), sealed(base));
  EXPECT_NO_THROW(readAll(openCheckpoint(ckpt)));
  // A version damaged into 1 would skip every checksum: refused.
  Metadata damaged = sealed(base);
  damaged["checkpoint_version"] = "1";
  writeSafetensors(file, sample.tensors(), damaged);
  expectError([&] { (void)openCheckpoint(ckpt); }, file,
              "checkpoint_version is 1 but the file has checksums");
}

TEST_F(CheckpointTest, ReadsVersion1CheckpointsUnverified) {
  // Written before checksums: opened, values checked, bytes not.
  SmallCheckpoint sample;
  std::string ckpt = path("old");
  fs::create_directories(ckpt);
  writeSafetensors(checkpointFile(ckpt), sample.tensors(),
                   {{"checkpoint_version", "1"},
                    {"step", "5"},
                    {"data_position", "7"},
                    {"seed", "0"},
                    {"model", sample.model}});
  Checkpoint loaded = openCheckpoint(ckpt);
  EXPECT_EQ(loaded.version, 1);
  EXPECT_FALSE(loaded.checksummed());
  EXPECT_EQ(loaded.state.step, 5);
  readAll(loaded);
  checkSameModel(loaded, sample.model);
  checkSameTensors(loaded, sample.expected());
}

TEST_F(CheckpointTest, RejectsNonFiniteValuesNamingTheTensor) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf}) {
    SmallCheckpoint sample;
    sample.m[5] = bad;
    std::string ckpt = path("nonfinite");
    writeUnchecked(ckpt, sample.tensors());
    // The checksum is right (the values were saved so): the values are not.
    Checkpoint loaded = openCheckpoint(ckpt);
    std::vector<float> back(8);
    loaded.read("wte", DType::F32, {4, 2}, back.data(), 32);
    expectError(
        [&] { loaded.read("wte.adam_m", DType::F32, {4, 2}, back.data(), 32); },
        checkpointFile(ckpt),
        "tensor \"wte.adam_m\" holds a non-finite value (NaN or infinity) at "
        "element 5 of 8");
  }
  // Half-precision dtypes too: bf16 +inf, f16 NaN; finite ones pass.
  std::vector<uint16_t> bf16{0x3f80, 0x7f80}, f16{0x3c00, 0x7e00},
      fine{0x3f80, 0xff7f};
  std::string ckpt = path("half");
  writeUnchecked(ckpt, {{"b", DType::BF16, {2}, bf16.data(), 4},
                        {"h", DType::F16, {2}, f16.data(), 4},
                        {"ok", DType::BF16, {2}, fine.data(), 4}});
  Checkpoint loaded = openCheckpoint(ckpt);
  std::vector<uint16_t> back(2);
  loaded.read("ok", DType::BF16, {2}, back.data(), 4);
  expectError([&] { loaded.read("b", DType::BF16, {2}, back.data(), 4); },
              checkpointFile(ckpt), "tensor \"b\" holds a non-finite value");
  expectError([&] { loaded.read("h", DType::F16, {2}, back.data(), 4); },
              checkpointFile(ckpt), "tensor \"h\" holds a non-finite value");
}

TEST_F(CheckpointTest, RejectsANegativeSecondMoment) {
  // v is an average of squares: a negative element (valid checksums) is an
  // edited or damaged file. The first moment and parameters may be negative.
  SmallCheckpoint sample;
  sample.v[6] = -0.5f;
  sample.m[6] = -0.5f;
  std::string ckpt = path("negative");
  writeUnchecked(ckpt, sample.tensors());
  Checkpoint loaded = openCheckpoint(ckpt);
  std::vector<float> back(8);
  loaded.read("wte", DType::F32, {4, 2}, back.data(), 32);
  loaded.read("wte.adam_m", DType::F32, {4, 2}, back.data(), 32);
  expectError(
      [&] { loaded.read("wte.adam_v", DType::F32, {4, 2}, back.data(), 32); },
      checkpointFile(ckpt),
      "tensor \"wte.adam_v\" (an AdamW second moment, never negative) holds "
      "a negative value at element 6 of 8");
  // -0 is zero, not negative.
  sample.v[6] = -0.0f;
  writeUnchecked(ckpt, sample.tensors());
  openCheckpoint(ckpt).read("wte.adam_v", DType::F32, {4, 2}, back.data(), 32);
}

TEST_F(CheckpointTest, SaveRefusesWhatAResumeWouldAndKeepsTheOldCheckpoint) {
  std::string ckpt = path("kept");
  SmallCheckpoint good;
  good.save(ckpt);
  std::string before = readFile(checkpointFile(ckpt));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char *tensor;
    float value;
    const char *problem;
  } cases[] = {
      {"wte", nan, "tensor \"wte\" holds a non-finite value (NaN or "
                   "infinity) at element 2 of 8"},
      {"wte.adam_m", -inf, "tensor \"wte.adam_m\" holds a non-finite value"},
      {"wte.adam_v", -1.0f, "tensor \"wte.adam_v\" (an AdamW second moment, "
                            "never negative) holds a negative value at "
                            "element 2 of 8"},
  };
  for (const Case &c : cases) {
    SmallCheckpoint bad;
    std::string name = c.tensor;
    (name == "wte" ? bad.wte : name == "wte.adam_m" ? bad.m : bad.v)[2] =
        c.value;
    expectError([&] { bad.save(ckpt); }, "not writing '" + checkpointFile(ckpt),
                c.problem);
    EXPECT_EQ(readFile(checkpointFile(ckpt)), before) << name;
    EXPECT_TRUE(strayTemporaries().empty()) << name;
  }
}

TEST_F(CheckpointTest, AnotherModelConfigurationIsAnError) {
  SmallCheckpoint sample;
  std::string ckpt = path("ckpt");
  sample.save(ckpt);
  Checkpoint loaded = openCheckpoint(ckpt);
  std::string file = checkpointFile(ckpt);
  checkSameModel(loaded, sample.model);
  // The training shape may change on resume.
  checkSameModel(loaded,
                 R"({"arch":"gpt2","batch":8,"layers":2,"seq_len":32})");
  expectError(
      [&] {
        checkSameModel(loaded,
                       R"({"arch":"gpt2","batch":4,"layers":3,"seq_len":64})");
      },
      file,
      "the model's \"layers\" is 2 in the checkpoint but 3 in the program; "
      "the checkpoint was written for another model");
  // The first difference in field order.
  expectError(
      [&] {
        checkSameModel(loaded, R"({"arch":"llama","batch":4,"layers":3})");
      },
      file, "the model's \"arch\" is \"gpt2\" in the checkpoint but \"llama\"");
  expectError(
      [&] {
        checkSameModel(
            loaded,
            R"({"arch":"gpt2","batch":4,"heads":2,"layers":2,"seq_len":64})");
      },
      file, "the model's \"heads\" is absent in the checkpoint but 2");

  // A checkpoint without a model description, or a broken one.
  saveCheckpoint(ckpt, sample.tensors(), {});
  expectError([&] { checkSameModel(openCheckpoint(ckpt), sample.model); }, file,
              "no metadata \"model\"");
  saveCheckpoint(ckpt, sample.tensors(), {}, {{"model", "[1, 2"}});
  expectError([&] { checkSameModel(openCheckpoint(ckpt), sample.model); }, file,
              "metadata \"model\" is not a JSON object");
}

TEST_F(CheckpointTest, AnotherSetOfTensorsIsAnError) {
  SmallCheckpoint sample;
  std::string ckpt = path("ckpt");
  sample.save(ckpt);
  Checkpoint loaded = openCheckpoint(ckpt);
  std::string file = checkpointFile(ckpt);
  checkSameTensors(loaded, sample.expected());

  std::vector<ExpectedTensor> more = sample.expected();
  more.push_back({"wpe", DType::F32, {2, 2}});
  expectError([&] { checkSameTensors(loaded, more); }, file,
              "the program needs tensor \"wpe\", which the checkpoint does "
              "not hold");
  std::vector<ExpectedTensor> fewer = sample.expected();
  fewer.erase(fewer.begin() + 1);
  expectError([&] { checkSameTensors(loaded, fewer); }, file,
              "the checkpoint holds tensor \"wte.adam_m\", which the program "
              "does not have");
  std::vector<ExpectedTensor> reshaped = sample.expected();
  reshaped[2].shape = {2, 4};
  expectError([&] { checkSameTensors(loaded, reshaped); }, file,
              "tensor \"wte.adam_v\" is F32[4, 2] in the checkpoint but "
              "F32[2, 4] in the program");
}

//===----------------------------------------------------------------------===//
// The save directory and stale temporaries
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, ChecksTheSaveDirectoryBeforeAnySave) {
  std::string ckpt = path("runs/new/ckpt");
  checkSaveDirectory(ckpt);
  EXPECT_TRUE(fs::is_directory(ckpt));
  EXPECT_TRUE(fs::is_empty(ckpt)) << "the probe file was not removed";
  // Again, with a checkpoint there: it stays as it was.
  SmallCheckpoint sample;
  sample.save(ckpt);
  std::string before = readFile(checkpointFile(ckpt));
  checkSaveDirectory(ckpt);
  EXPECT_EQ(readFile(checkpointFile(ckpt)), before);
  EXPECT_TRUE(strayTemporaries().empty());

  // Onto a file, and under /proc (read-only even for root, unlike a
  // chmod-ed directory).
  std::string plain = path("plain-file");
  writeFile(plain, "x");
  expectError([&] { checkSaveDirectory(plain); }, plain,
              "cannot create checkpoint directory");
  expectError([&] { checkSaveDirectory(plain + "/sub"); }, plain,
              "cannot create checkpoint directory");
  expectError([&] { checkSaveDirectory("/proc/partition-ckpt"); },
              "/proc/partition-ckpt", "cannot create checkpoint directory");
  expectError([&] { checkSaveDirectory("/proc/self"); },
              "/proc/self/checkpoint.safetensors",
              "cannot create a temporary file beside it");
}

/// The pid of a process that has exited and been reaped.
pid_t deadPid() {
  pid_t child = ::fork();
  if (child == 0)
    ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST_F(CheckpointTest, RemovesTheTemporariesOfDeadWritersOnly) {
  std::string ckpt = path("ckpt");
  fs::create_directories(ckpt);
  auto temporary = [&](pid_t pid, const char *n) {
    std::string name = checkpointFile(ckpt) + ".tmp." + std::to_string(pid) +
                       "." + n;
    writeFile(name, "half a checkpoint");
    return name;
  };
  pid_t dead = deadPid();
  ASSERT_NE(::kill(dead, 0), 0);
  std::string stale = temporary(dead, "0");
  std::string stale2 = temporary(dead, "17");
  std::string mine = temporary(::getpid(), "99");
  std::string parents = temporary(::getppid(), "0");
  // Names of another shape are not ours to remove.
  std::string other = checkpointFile(ckpt) + ".tmp." + std::to_string(dead);
  std::string other2 = checkpointFile(ckpt) + ".tmp.x1.0";
  std::string other3 = path("ckpt/notes.tmp." + std::to_string(dead) + ".0");
  for (const std::string &name : {other, other2, other3})
    writeFile(name, "keep");

  std::vector<std::string> removed =
      removeStaleTemporaries(checkpointFile(ckpt));
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expected{stale, stale2};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  for (const std::string &name : {mine, parents, other, other2, other3})
    EXPECT_TRUE(fs::exists(name)) << name;
  EXPECT_FALSE(fs::exists(stale));

  // The next save does the same.
  std::string stale3 = temporary(dead, "3");
  SmallCheckpoint().save(ckpt);
  EXPECT_FALSE(fs::exists(stale3));
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(parents));
  EXPECT_NO_THROW(readAll(openCheckpoint(ckpt)));
}

} // namespace
