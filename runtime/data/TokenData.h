//===- TokenData.h - token files: llm.c shards, raw uint16, text -*- C++ -*-===//
//
// Reads the token sources the runtime trains on into memory:
//
//   * llm.c shards: a header of 256 little-endian int32 (magic 20240520,
//     version 1, token count, the rest unused), then exactly `count`
//     little-endian uint16 tokens;
//   * raw headerless little-endian uint16 files (nanoGPT's train.bin);
//   * any text file, tokenized as bytes (vocabulary 256).
//
// Format::Auto picks llm.c when the file starts with the llm.c magic; a file
// laid out as an llm.c shard with another magic (the 253 reserved header
// int32 zero, the token count matching the file size) is an error naming
// the magic; anything else is raw uint16. Auto never guesses text (pass
// Format::Text / --text).
// Every failure throws DataError.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_DATA_TOKENDATA_H
#define PARTITION_RUNTIME_DATA_TOKENDATA_H

#include "runtime/data/DataError.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace partition::runtime::data {

enum class Format {
  Auto, ///< llm.c if the file starts with its magic, an error if it is laid
        ///< out as an llm.c shard with another magic, else raw uint16.
  LlmC, ///< llm.c shard (header + uint16); a bad magic is an error.
  Raw,  ///< headerless uint16.
  Text, ///< bytes of any file, vocabulary 256.
};

/// "auto", "llmc" (also "llm.c"), "raw", "text"; anything else throws
/// DataError listing the accepted names.
Format parseFormat(std::string_view name);
std::string_view formatName(Format format);

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr int64_t kLlmcHeaderInts = 256;
inline constexpr int64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;
/// Byte tokenization of text files.
inline constexpr int64_t kTextVocab = 256;

/// Tokens of one source, held in memory. Ids fit uint16 in every supported
/// source (the file formats store uint16; the synthetic language is limited to
/// 65536 tokens); loaders widen them to int32.
struct TokenStream {
  /// The file path, or a description of a generated stream; used in messages.
  std::string source;
  /// The format actually read (never Auto); Raw for generated streams.
  Format format = Format::Raw;
  /// Where token 0 starts in the file, and its width in bytes there; both 0
  /// for generated streams (messages then give no byte offset).
  int64_t headerBytes = 0;
  int64_t bytesPerToken = 0;
  std::vector<uint16_t> tokens;

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

/// Reads `path` in `format` (Text delegates to readTextFile). Throws DataError
/// for a missing or unreadable file, a truncated header, a bad magic or
/// version under Format::LlmC, a token count that disagrees with the file
/// size, an odd byte length for raw uint16, and a file with no tokens.
TokenStream readTokenFile(const std::string &path, Format format = Format::Auto);

/// Every byte of `path` is one token (0..255). Throws DataError for a missing,
/// unreadable or empty file. The bytes are not checked to be valid UTF-8.
TokenStream readTextFile(const std::string &path);

/// Writes `tokens` as an llm.c shard / a raw uint16 file (little-endian).
/// Throws DataError when the file cannot be written.
void writeLlmcFile(const std::string &path, const std::vector<uint16_t> &tokens);
void writeRawFile(const std::string &path, const std::vector<uint16_t> &tokens);

/// Throws DataError naming the source, the first offending position (and its
/// byte offset in the file) and the id if any token is >= vocab.
void validateVocab(const TokenStream &stream, int64_t vocab);

} // namespace partition::runtime::data

#endif // PARTITION_RUNTIME_DATA_TOKENDATA_H
