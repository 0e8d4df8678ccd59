//===- TokenData.cpp - token files: llm.c shards, raw, .npy, text --------===//

#include "runtime/data/TokenData.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

namespace partition::runtime::data {
namespace {

namespace fs = std::filesystem;

std::string quotePath(const std::string &path) { return "'" + path + "'"; }

bool hostIsLittleEndian() {
  const uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

/// Owns a FILE*; the files are little-endian whatever the host.
class File {
public:
  File(const std::string &path, const char *mode, const std::string &kind)
      : path(path), handle(std::fopen(path.c_str(), mode)) {
    if (!handle) {
      const bool writing = mode[0] == 'w';
      throw DataError(std::string("cannot ") + (writing ? "write " : "open ") +
                      kind + " " + quotePath(path) + ": " + std::strerror(errno) +
                      (writing ? "; check that its directory exists and is "
                                 "writable"
                               : "; check its permissions"));
    }
  }
  ~File() {
    if (handle)
      std::fclose(handle);
  }
  File(const File &) = delete;
  File &operator=(const File &) = delete;

  void read(void *buffer, int64_t bytes, int64_t offset) {
    const size_t got = std::fread(buffer, 1, static_cast<size_t>(bytes), handle);
    if (static_cast<int64_t>(got) != bytes)
      throw DataError("cannot read " + quotePath(path) + ": got " +
                      std::to_string(got) + " of " + std::to_string(bytes) +
                      " bytes at offset " + std::to_string(offset) +
                      (std::ferror(handle) ? std::string(" (") +
                                                 std::strerror(errno) + ")"
                                           : std::string()) +
                      "; the file changed while being read or cannot be read, "
                      "check it and retry");
  }

  void write(const void *buffer, int64_t bytes) {
    if (std::fwrite(buffer, 1, static_cast<size_t>(bytes), handle) !=
        static_cast<size_t>(bytes))
      throw DataError("cannot write " + quotePath(path) + ": " +
                      std::strerror(errno) + "; check the disk space");
  }

  void rewind() { std::rewind(handle); }

  void close() {
    FILE *h = handle;
    handle = nullptr;
    if (std::fclose(h) != 0)
      throw DataError("cannot write " + quotePath(path) + ": " +
                      std::strerror(errno) + "; check the disk space");
  }

private:
  std::string path;
  FILE *handle;
};

/// The size of `path`, after checking it names a regular file.
int64_t regularFileSize(const std::string &path, const std::string &kind) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found)
    throw DataError(kind + " " + quotePath(path) +
                    " does not exist; check the path");
  if (ec)
    throw DataError("cannot access " + kind + " " + quotePath(path) + ": " +
                    ec.message() + "; check the path and its permissions");
  if (status.type() == fs::file_type::directory)
    throw DataError(kind + " " + quotePath(path) +
                    " is a directory; pass the path of a file");
  if (status.type() != fs::file_type::regular)
    throw DataError(kind + " " + quotePath(path) +
                    " is not a regular file; pass the path of a file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec)
    throw DataError("cannot read the size of " + kind + " " + quotePath(path) +
                    ": " + ec.message() + "; check its permissions");
  return static_cast<int64_t>(size);
}

int32_t littleEndianInt32(const unsigned char *bytes) {
  const uint32_t value = uint32_t(bytes[0]) | uint32_t(bytes[1]) << 8 |
                         uint32_t(bytes[2]) << 16 | uint32_t(bytes[3]) << 24;
  int32_t result;
  std::memcpy(&result, &value, 4);
  return result;
}

void putLittleEndianInt32(unsigned char *bytes, int32_t value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  for (int i = 0; i < 4; ++i)
    bytes[i] = static_cast<unsigned char>(bits >> (8 * i));
}

/// Reads `count` little-endian tokens of `width` bytes (2 or 4) from the
/// current position of `file`, widened to uint32.
std::vector<uint32_t> readTokens(File &file, int64_t count, int64_t width,
                                 int64_t offset) {
  std::vector<uint32_t> tokens(static_cast<size_t>(count));
  if (width == 4) {
    file.read(tokens.data(), count * 4, offset);
    if (!hostIsLittleEndian())
      for (uint32_t &token : tokens)
        token = (token >> 24) | (token >> 8 & 0xff00) |
                (token << 8 & 0xff0000) | (token << 24);
    return tokens;
  }
  std::vector<uint16_t> narrow(static_cast<size_t>(count));
  file.read(narrow.data(), count * 2, offset);
  const bool swap = !hostIsLittleEndian();
  for (size_t i = 0; i < narrow.size(); ++i)
    tokens[i] = swap ? static_cast<uint16_t>(narrow[i] >> 8 | narrow[i] << 8)
                     : narrow[i];
  return tokens;
}

/// Writes `tokens` little-endian.
template <typename T>
void writeTokens(File &file, const std::vector<T> &tokens) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4);
  std::vector<unsigned char> bytes(tokens.size() * sizeof(T));
  for (size_t i = 0; i < tokens.size(); ++i)
    for (size_t b = 0; b < sizeof(T); ++b)
      bytes[i * sizeof(T) + b] =
          static_cast<unsigned char>(uint32_t(tokens[i]) >> (8 * b));
  file.write(bytes.data(), static_cast<int64_t>(bytes.size()));
}

/// The token width an llm.c header of `magic` announces, or 0 for a magic
/// that is neither of llm.c's.
int64_t llmcWidth(int32_t magic) {
  return magic == kLlmcMagic ? 2 : magic == kLlmc32Magic ? 4 : 0;
}

TokenStream readLlmc(File &file, const std::string &path, int64_t size,
                     const unsigned char *head, bool forced) {
  const std::string name = "llm.c token file " + quotePath(path);
  if (size < 4)
    throw DataError(name + " is truncated: its header needs " +
                    std::to_string(kLlmcHeaderBytes) +
                    " bytes but the file has " + std::to_string(size) +
                    "; re-download or regenerate the file");
  const int32_t magic = littleEndianInt32(head);
  const int64_t width = llmcWidth(magic);
  if (width == 0)
    throw DataError("token file " + quotePath(path) +
                    " is not an llm.c shard: its magic is " +
                    std::to_string(magic) + ", expected " +
                    std::to_string(kLlmcMagic) + " (uint16 tokens) or " +
                    std::to_string(kLlmc32Magic) + " (uint32 tokens)" +
                    (forced ? "; pass format raw or raw32 for a headerless "
                              "file or auto to detect the format"
                            : "; regenerate the file"));
  if (size < kLlmcHeaderBytes)
    throw DataError(name + " is truncated: its header needs " +
                    std::to_string(kLlmcHeaderBytes) +
                    " bytes but the file has " + std::to_string(size) +
                    "; re-download or regenerate the file");
  const int32_t version = littleEndianInt32(head + 4);
  const int32_t expectedVersion = width == 2 ? kLlmcVersion : kLlmc32Version;
  if (version != expectedVersion)
    throw DataError(
        name + " has version " + std::to_string(version) + ", but only " +
        "version " + std::to_string(expectedVersion) + " (" +
        (width == 2 ? "uint16" : "uint32") + " tokens) is supported under "
        "magic " + std::to_string(magic) + "; regenerate it with llm.c's "
        "tokenizer scripts or scripts/tokenize.py");
  const int64_t count = littleEndianInt32(head + 8);
  if (count < 0)
    throw DataError(name + " announces a negative token count (" +
                    std::to_string(count) +
                    "); the header is corrupt, regenerate the file");
  const int64_t expected = kLlmcHeaderBytes + width * count;
  if (size < expected)
    throw DataError(name + " is truncated: its header announces " +
                    std::to_string(count) + " tokens (" +
                    std::to_string(expected) + " bytes) but the file has " +
                    std::to_string(size) +
                    " bytes; re-download or regenerate the file");
  if (size > expected)
    throw DataError(name + " is longer than its header says: " +
                    std::to_string(count) + " tokens need " +
                    std::to_string(expected) + " bytes but the file has " +
                    std::to_string(size) +
                    " bytes; the header or the file is corrupt, regenerate it");
  if (count == 0)
    throw DataError(name + " holds no tokens (its header announces 0); pass a "
                    "shard with tokens");
  TokenStream stream;
  stream.source = path;
  stream.format = Format::LlmC;
  stream.headerBytes = kLlmcHeaderBytes;
  stream.bytesPerToken = width;
  // `head` already consumed the header: the file position is at the tokens.
  stream.tokens = readTokens(file, count, width, kLlmcHeaderBytes);
  return stream;
}

/// Whether the first kLlmcHeaderBytes of a `size`-byte file are laid out
/// as an llm.c header, whatever its magic and version say: the 253 reserved
/// int32 are zero and the token count accounts for the file's size exactly
/// (as uint16 or uint32 tokens). Raw uint16 tokens would need 506 zero
/// tokens at positions 6-511 and a pair at 4-5 spelling the file's length:
/// no real data looks like that.
bool hasLlmcLayout(const unsigned char *head, int64_t size) {
  if (size < kLlmcHeaderBytes)
    return false;
  for (int64_t i = 12; i < kLlmcHeaderBytes; ++i)
    if (head[i] != 0)
      return false;
  const int64_t count = littleEndianInt32(head + 8);
  return count > 0 && (kLlmcHeaderBytes + 2 * count == size ||
                       kLlmcHeaderBytes + 4 * count == size);
}

TokenStream readRaw(File &file, const std::string &path, int64_t size,
                    int64_t width) {
  const std::string kind = width == 2 ? "uint16" : "uint32";
  const std::string name = "raw " + kind + " token file " + quotePath(path);
  if (size == 0)
    throw DataError(name + " is empty; pass a file with tokens");
  if (size % width != 0)
    throw DataError(
        name +
        (width == 2 ? " has an odd length of " + std::to_string(size) +
                          " bytes, so it is not uint16 tokens; read it as "
                          "text (--text) or regenerate it"
                    : " has a length of " + std::to_string(size) +
                          " bytes, not a multiple of 4, so it is not uint32 "
                          "tokens; check --data-format or regenerate it"));
  file.rewind();
  TokenStream stream;
  stream.source = path;
  stream.format = width == 2 ? Format::Raw : Format::Raw32;
  stream.headerBytes = 0;
  stream.bytesPerToken = width;
  stream.tokens = readTokens(file, size / width, width, 0);
  return stream;
}

//===----------------------------------------------------------------------===//
// NumPy .npy: "\x93NUMPY", a major and minor version byte, the header's
// length (uint16 in version 1, uint32 in 2 and 3), then the header, a
// Python dict literal such as {'descr': '<u4', 'fortran_order': False,
// 'shape': (1000,), }, padded with spaces to a multiple of 64 bytes, then
// the array's bytes.
//===----------------------------------------------------------------------===//

constexpr unsigned char kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
/// Bytes before the header of a version 1 / a version 2 or 3 file.
constexpr int64_t kNpyPreamble1 = 10;
constexpr int64_t kNpyPreamble2 = 12;
/// numpy itself refuses headers longer than this (numpy.lib.format).
constexpr int64_t kNpyMaxHeader = 100000;

bool startsWithNpyMagic(const unsigned char *head, int64_t size) {
  return size >= 6 && std::memcmp(head, kNpyMagic, 6) == 0;
}

/// The text after `'key':` in an .npy header dict, blanks skipped; throws
/// when the key is absent.
std::string_view npyValue(std::string_view header, std::string_view key,
                          const std::string &name) {
  const std::string quoted[2] = {"'" + std::string(key) + "'",
                                 "\"" + std::string(key) + "\""};
  for (const std::string &q : quoted) {
    size_t at = header.find(q);
    if (at == std::string_view::npos)
      continue;
    at = header.find_first_not_of(" ", at + q.size());
    if (at == std::string_view::npos || header[at] != ':')
      break;
    at = header.find_first_not_of(" ", at + 1);
    if (at == std::string_view::npos)
      break;
    return header.substr(at);
  }
  throw DataError(name + " has no '" + std::string(key) +
                  "' in its header; the file is not a valid .npy array, "
                  "write it with numpy.save");
}

TokenStream readNpy(File &file, const std::string &path, int64_t size,
                    const unsigned char *head, int64_t headBytes) {
  const std::string name = ".npy token file " + quotePath(path);
  auto corrupt = [&](const std::string &what) {
    return DataError(name + " " + what +
                     "; the file is not a valid .npy array, write it with "
                     "numpy.save");
  };
  if (!startsWithNpyMagic(head, headBytes))
    throw DataError("token file " + quotePath(path) +
                    " is not an .npy array: it does not start with "
                    "\\x93NUMPY; pass format auto to detect the format");
  if (headBytes < kNpyPreamble1)
    throw corrupt("is truncated in its preamble (" + std::to_string(size) +
                  " bytes)");
  const int major = head[6];
  if (major < 1 || major > 3)
    throw corrupt("has format version " + std::to_string(major) + "." +
                  std::to_string(int(head[7])) + " (1 to 3 are known)");
  const int64_t preamble = major == 1 ? kNpyPreamble1 : kNpyPreamble2;
  if (headBytes < preamble)
    throw corrupt("is truncated in its preamble (" + std::to_string(size) +
                  " bytes)");
  const int64_t headerLength =
      major == 1 ? int64_t(head[8]) | int64_t(head[9]) << 8
                 : int64_t(uint32_t(littleEndianInt32(head + 8)));
  if (headerLength > kNpyMaxHeader)
    throw corrupt("announces a header of " + std::to_string(headerLength) +
                  " bytes (numpy writes at most " +
                  std::to_string(kNpyMaxHeader) + ")");
  const int64_t dataOffset = preamble + headerLength;
  if (size < dataOffset)
    throw corrupt("is truncated: its header needs " +
                  std::to_string(dataOffset) + " bytes but the file has " +
                  std::to_string(size));
  std::string header(static_cast<size_t>(headerLength), '\0');
  file.rewind();
  std::vector<unsigned char> skip(static_cast<size_t>(preamble));
  file.read(skip.data(), preamble, 0);
  file.read(header.data(), headerLength, preamble);

  // dtype: little-endian (or single-byte-order-free) uint16, uint32, int32.
  std::string_view descr = npyValue(header, "descr", name);
  const char quote = descr.empty() ? '\0' : descr[0];
  size_t close = quote == '\'' || quote == '"' ? descr.find(quote, 1)
                                               : std::string_view::npos;
  if (close == std::string_view::npos)
    throw corrupt("has a 'descr' that is not a dtype string (a structured "
                  "array?)");
  const std::string dtype(descr.substr(1, close - 1));
  int64_t width = 0;
  bool isSigned = false;
  if (dtype == "<u2" || dtype == "=u2")
    width = 2;
  else if (dtype == "<u4" || dtype == "=u4")
    width = 4;
  else if (dtype == "<i4" || dtype == "=i4")
    width = 4, isSigned = true;
  else if (dtype == ">u2" || dtype == ">u4" || dtype == ">i4")
    throw DataError(name + " holds big-endian " + dtype +
                    " tokens; save them little-endian (numpy: "
                    "array.astype('<u4')) and retry");
  else
    throw DataError(name + " holds dtype '" + dtype +
                    "', not token ids; save uint16, uint32 or int32 ids "
                    "(numpy: array.astype(numpy.uint32))");

  std::string_view order = npyValue(header, "fortran_order", name);
  const bool fortran = order.substr(0, 4) == "True";
  if (!fortran && order.substr(0, 5) != "False")
    throw corrupt("has a 'fortran_order' that is neither True nor False");

  std::string_view shapeText = npyValue(header, "shape", name);
  if (shapeText.empty() || shapeText[0] != '(' ||
      shapeText.find(')') == std::string_view::npos)
    throw corrupt("has a 'shape' that is not a tuple");
  shapeText = shapeText.substr(1, shapeText.find(')') - 1);
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (size_t at = 0; at < shapeText.size();) {
    at = shapeText.find_first_not_of(" ,", at);
    if (at == std::string_view::npos)
      break;
    int64_t dim = 0;
    size_t digits = 0;
    while (at + digits < shapeText.size() &&
           std::isdigit(static_cast<unsigned char>(shapeText[at + digits]))) {
      dim = dim * 10 + (shapeText[at + digits] - '0');
      if (dim > (int64_t(1) << 40))
        throw corrupt("has a dimension beyond 2^40 in its 'shape'");
      ++digits;
    }
    if (digits == 0)
      throw corrupt("has a 'shape' that is not a tuple of integers");
    shape.push_back(dim);
    count = dim == 0 || count > (int64_t(1) << 40) / dim
                ? (dim == 0 ? 0 : int64_t(1) << 41)
                : count * dim;
    at += digits;
  }
  if (fortran && shape.size() > 1)
    throw DataError(name + " is a Fortran-order array of " +
                    std::to_string(shape.size()) +
                    " dimensions; save it in C order "
                    "(numpy.ascontiguousarray) or flatten it");
  const int64_t expected = dataOffset + width * count;
  if (count > (int64_t(1) << 40) || size < expected)
    throw DataError(name + " is truncated: its header announces " +
                    std::to_string(count) + " tokens of " +
                    std::to_string(width) + " bytes but the file has " +
                    std::to_string(size - dataOffset) +
                    " bytes of data; re-save it");
  if (size > expected)
    throw DataError(name + " is longer than its header says: " +
                    std::to_string(count) + " tokens need " +
                    std::to_string(expected) + " bytes but the file has " +
                    std::to_string(size) +
                    "; the header or the file is corrupt, re-save it");
  if (count == 0)
    throw DataError(name + " holds no tokens (its shape has no elements); "
                    "pass an array with tokens");
  TokenStream stream;
  stream.source = path;
  stream.format = Format::Npy;
  stream.headerBytes = dataOffset;
  stream.bytesPerToken = width;
  stream.tokens = readTokens(file, count, width, dataOffset);
  if (isSigned) {
    auto negative = std::find_if(stream.tokens.begin(), stream.tokens.end(),
                                 [](uint32_t id) { return id >> 31; });
    if (negative != stream.tokens.end()) {
      const int64_t position = negative - stream.tokens.begin();
      int32_t id;
      std::memcpy(&id, &*negative, 4);
      throw DataError("token id " + std::to_string(id) + " at position " +
                      std::to_string(position) + " (byte offset " +
                      std::to_string(dataOffset + 4 * position) + ") of " +
                      quotePath(path) +
                      " is negative; token ids count from 0, fix the "
                      "tokenizer's output");
    }
  }
  return stream;
}

} // namespace

Format parseFormat(std::string_view name) {
  if (name == "auto")
    return Format::Auto;
  if (name == "llmc" || name == "llm.c")
    return Format::LlmC;
  if (name == "raw")
    return Format::Raw;
  if (name == "raw32")
    return Format::Raw32;
  if (name == "npy")
    return Format::Npy;
  if (name == "text")
    return Format::Text;
  throw DataError("unknown token file format '" + std::string(name) +
                  "'; use one of auto, llmc, raw, raw32, npy, text");
}

std::string_view formatName(Format format) {
  switch (format) {
  case Format::Auto:
    return "auto";
  case Format::LlmC:
    return "llmc";
  case Format::Raw:
    return "raw";
  case Format::Raw32:
    return "raw32";
  case Format::Npy:
    return "npy";
  case Format::Text:
    return "text";
  }
  return "unknown";
}

TokenStream readTokenFile(const std::string &path, Format format) {
  if (format == Format::Text)
    return readTextFile(path);
  const int64_t size = regularFileSize(path, "token file");
  File file(path, "rb", "token file");
  // The header, or as much of it as the file has; raw formats read from
  // the start again.
  unsigned char head[kLlmcHeaderBytes];
  const bool raw = format == Format::Raw || format == Format::Raw32;
  const int64_t headBytes =
      raw ? 0 : std::min<int64_t>(size, kLlmcHeaderBytes);
  file.read(head, headBytes, 0);
  if (format == Format::Raw32)
    return readRaw(file, path, size, 4);
  const bool llmc = format == Format::LlmC ||
                    (format == Format::Auto && size >= 4 &&
                     llmcWidth(littleEndianInt32(head)) != 0);
  if (llmc)
    return readLlmc(file, path, size, head, format == Format::LlmC);
  if (format == Format::Npy ||
      (format == Format::Auto && startsWithNpyMagic(head, headBytes)))
    return readNpy(file, path, size, head, headBytes);
  // Auto mode and a header with the wrong magic: a shard of another version
  // or a damaged one. Reading it as raw tokens would train on its header.
  if (format == Format::Auto && hasLlmcLayout(head, size))
    throw DataError("token file " + quotePath(path) +
                    " has the layout of an llm.c shard (a 1024-byte header "
                    "whose token count matches the file size) but its magic "
                    "is " + std::to_string(littleEndianInt32(head)) +
                    ", expected " + std::to_string(kLlmcMagic) +
                    " (version " + std::to_string(littleEndianInt32(head + 4)) +
                    ") or " + std::to_string(kLlmc32Magic) +
                    "; regenerate it, or pass format raw to read it as "
                    "headerless uint16 tokens");
  return readRaw(file, path, size, 2);
}

TokenStream readTextFile(const std::string &path) {
  const int64_t size = regularFileSize(path, "text file");
  if (size == 0)
    throw DataError("text file " + quotePath(path) +
                    " is empty; pass a text file with content");
  File file(path, "rb", "text file");
  std::vector<unsigned char> bytes(static_cast<size_t>(size));
  file.read(bytes.data(), size, 0);
  TokenStream stream;
  stream.source = path;
  stream.format = Format::Text;
  stream.headerBytes = 0;
  stream.bytesPerToken = 1;
  stream.tokens.assign(bytes.begin(), bytes.end());
  return stream;
}

namespace {

template <typename T>
void writeLlmc(const std::string &path, const std::vector<T> &tokens) {
  if (tokens.size() >
      static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw DataError("cannot write llm.c token file " + quotePath(path) + ": " +
                    std::to_string(tokens.size()) +
                    " tokens do not fit its int32 count; split them into "
                    "several shards");
  const bool wide = sizeof(T) == 4;
  unsigned char header[kLlmcHeaderBytes] = {};
  putLittleEndianInt32(header, wide ? kLlmc32Magic : kLlmcMagic);
  putLittleEndianInt32(header + 4, wide ? kLlmc32Version : kLlmcVersion);
  putLittleEndianInt32(header + 8, static_cast<int32_t>(tokens.size()));
  File file(path, "wb", "llm.c token file");
  file.write(header, kLlmcHeaderBytes);
  writeTokens(file, tokens);
  file.close();
}

template <typename T>
void writeRaw(const std::string &path, const std::vector<T> &tokens) {
  File file(path, "wb",
            sizeof(T) == 2 ? "raw uint16 token file" : "raw uint32 token file");
  writeTokens(file, tokens);
  file.close();
}

} // namespace

void writeLlmcFile(const std::string &path,
                   const std::vector<uint16_t> &tokens) {
  writeLlmc(path, tokens);
}
void writeLlmcFile(const std::string &path,
                   const std::vector<uint32_t> &tokens) {
  writeLlmc(path, tokens);
}
void writeRawFile(const std::string &path,
                  const std::vector<uint16_t> &tokens) {
  writeRaw(path, tokens);
}
void writeRawFile(const std::string &path,
                  const std::vector<uint32_t> &tokens) {
  writeRaw(path, tokens);
}

void validateVocab(const TokenStream &stream, int64_t vocab) {
  if (vocab <= 0)
    throw DataError("cannot check the tokens of " + quotePath(stream.source) +
                    " against a vocabulary of " + std::to_string(vocab) +
                    " tokens; the model's vocab_size must be positive");
  const auto bad =
      std::find_if(stream.tokens.begin(), stream.tokens.end(),
                   [&](uint32_t id) { return static_cast<int64_t>(id) >= vocab; });
  if (bad == stream.tokens.end())
    return;
  const int64_t position = bad - stream.tokens.begin();
  std::string where = "position " + std::to_string(position);
  if (stream.bytesPerToken > 0)
    where += " (byte offset " +
             std::to_string(stream.headerBytes +
                            position * stream.bytesPerToken) +
             ")";
  throw DataError("token id " + std::to_string(*bad) + " at " + where +
                  " of " + quotePath(stream.source) +
                  " is outside the model's vocabulary of " +
                  std::to_string(vocab) +
                  " tokens; use data tokenized for this model or raise its "
                  "vocab_size");
}

} // namespace partition::runtime::data
