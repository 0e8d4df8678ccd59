//===- TokenData.cpp - token files: llm.c shards, raw uint16, text --------===//

#include "runtime/data/TokenData.h"

#include <algorithm>
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

/// Reads `count` little-endian uint16 from the current position of `file`.
std::vector<uint16_t> readUint16(File &file, int64_t count, int64_t offset) {
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  file.read(tokens.data(), count * 2, offset);
  if (!hostIsLittleEndian())
    for (uint16_t &token : tokens)
      token = static_cast<uint16_t>(token >> 8 | token << 8);
  return tokens;
}

void writeUint16(File &file, const std::vector<uint16_t> &tokens) {
  if (hostIsLittleEndian()) {
    file.write(tokens.data(), static_cast<int64_t>(tokens.size()) * 2);
    return;
  }
  std::vector<uint16_t> swapped(tokens);
  for (uint16_t &token : swapped)
    token = static_cast<uint16_t>(token >> 8 | token << 8);
  file.write(swapped.data(), static_cast<int64_t>(swapped.size()) * 2);
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
  if (magic != kLlmcMagic)
    throw DataError("token file " + quotePath(path) +
                    " is not an llm.c shard: its magic is " +
                    std::to_string(magic) + ", expected " +
                    std::to_string(kLlmcMagic) +
                    (forced ? "; pass format raw for a headerless uint16 file "
                              "or auto to detect the format"
                            : "; regenerate the file"));
  if (size < kLlmcHeaderBytes)
    throw DataError(name + " is truncated: its header needs " +
                    std::to_string(kLlmcHeaderBytes) +
                    " bytes but the file has " + std::to_string(size) +
                    "; re-download or regenerate the file");
  const int32_t version = littleEndianInt32(head + 4);
  if (version != kLlmcVersion)
    throw DataError(name + " has version " + std::to_string(version) +
                    ", but only version " + std::to_string(kLlmcVersion) +
                    " (uint16 tokens) is supported; regenerate it with llm.c's "
                    "GPT-2 tokenizer scripts");
  const int64_t count = littleEndianInt32(head + 8);
  if (count < 0)
    throw DataError(name + " announces a negative token count (" +
                    std::to_string(count) +
                    "); the header is corrupt, regenerate the file");
  const int64_t expected = kLlmcHeaderBytes + 2 * count;
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
  stream.bytesPerToken = 2;
  // `head` already consumed the header: the file position is at the tokens.
  stream.tokens = readUint16(file, count, kLlmcHeaderBytes);
  return stream;
}

/// Whether the first kLlmcHeaderBytes of a `size`-byte file are laid out
/// as an llm.c header, whatever its magic and version say: the 253 reserved
/// int32 are zero and the token count accounts for the file's size exactly.
/// Raw uint16 tokens would need 506 zero tokens at positions 6-511 and a
/// pair at 4-5 spelling the file's length: no real data looks like that.
bool hasLlmcLayout(const unsigned char *head, int64_t size) {
  if (size < kLlmcHeaderBytes)
    return false;
  for (int64_t i = 12; i < kLlmcHeaderBytes; ++i)
    if (head[i] != 0)
      return false;
  const int64_t count = littleEndianInt32(head + 8);
  return count > 0 && kLlmcHeaderBytes + 2 * count == size;
}

TokenStream readRaw(File &file, const std::string &path, int64_t size) {
  const std::string name = "raw uint16 token file " + quotePath(path);
  if (size == 0)
    throw DataError(name + " is empty; pass a file with tokens");
  if (size % 2 != 0)
    throw DataError(name + " has an odd length of " + std::to_string(size) +
                    " bytes, so it is not uint16 tokens; read it as text "
                    "(--text) or regenerate it");
  file.rewind();
  TokenStream stream;
  stream.source = path;
  stream.format = Format::Raw;
  stream.headerBytes = 0;
  stream.bytesPerToken = 2;
  stream.tokens = readUint16(file, size / 2, 0);
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
  if (name == "text")
    return Format::Text;
  throw DataError("unknown token file format '" + std::string(name) +
                  "'; use one of auto, llmc, raw, text");
}

std::string_view formatName(Format format) {
  switch (format) {
  case Format::Auto:
    return "auto";
  case Format::LlmC:
    return "llmc";
  case Format::Raw:
    return "raw";
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
  // The header, or as much of it as the file has; Raw reads from the start
  // again.
  unsigned char head[kLlmcHeaderBytes];
  const int64_t headBytes =
      format == Format::Raw ? 0 : std::min<int64_t>(size, kLlmcHeaderBytes);
  file.read(head, headBytes, 0);
  const bool llmc = format == Format::LlmC ||
                    (format == Format::Auto && size >= 4 &&
                     littleEndianInt32(head) == kLlmcMagic);
  if (llmc)
    return readLlmc(file, path, size, head, format == Format::LlmC);
  // Auto mode and a header with the wrong magic: a shard of another version
  // or a damaged one. Reading it as raw tokens would train on its header.
  if (format == Format::Auto && hasLlmcLayout(head, size))
    throw DataError("token file " + quotePath(path) +
                    " has the layout of an llm.c shard (a 1024-byte header "
                    "whose token count matches the file size) but its magic "
                    "is " + std::to_string(littleEndianInt32(head)) +
                    ", expected " + std::to_string(kLlmcMagic) +
                    " (version " + std::to_string(littleEndianInt32(head + 4)) +
                    "); regenerate it, or pass format raw to read it as "
                    "headerless uint16 tokens");
  return readRaw(file, path, size);
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

void writeLlmcFile(const std::string &path,
                   const std::vector<uint16_t> &tokens) {
  if (tokens.size() >
      static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw DataError("cannot write llm.c token file " + quotePath(path) + ": " +
                    std::to_string(tokens.size()) +
                    " tokens do not fit its int32 count; split them into "
                    "several shards");
  unsigned char header[kLlmcHeaderBytes] = {};
  putLittleEndianInt32(header, kLlmcMagic);
  putLittleEndianInt32(header + 4, kLlmcVersion);
  putLittleEndianInt32(header + 8, static_cast<int32_t>(tokens.size()));
  File file(path, "wb", "llm.c token file");
  file.write(header, kLlmcHeaderBytes);
  writeUint16(file, tokens);
  file.close();
}

void writeRawFile(const std::string &path,
                  const std::vector<uint16_t> &tokens) {
  File file(path, "wb", "raw uint16 token file");
  writeUint16(file, tokens);
  file.close();
}

void validateVocab(const TokenStream &stream, int64_t vocab) {
  if (vocab <= 0)
    throw DataError("cannot check the tokens of " + quotePath(stream.source) +
                    " against a vocabulary of " + std::to_string(vocab) +
                    " tokens; the model's vocab_size must be positive");
  // Every uint16 id is in range of a vocabulary this large.
  if (vocab > std::numeric_limits<uint16_t>::max())
    return;
  const auto bad =
      std::find_if(stream.tokens.begin(), stream.tokens.end(),
                   [&](uint16_t id) { return static_cast<int64_t>(id) >= vocab; });
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
