//===- TokenData.h - token files: llm.c shards, raw, .npy, text -*- C++ -*-===//
//
// Reads the token sources the runtime trains on into memory:
//
//   * llm.c shards: a header of 256 little-endian int32 (magic, version,
//     token count, the rest unused), then exactly `count` little-endian
//     tokens: uint16 under GPT-2's header (magic 20240520, version 1),
//     uint32 under Llama 3's (magic 20240801, version 7), as llm.c's
//     dev/data/data_common.py writes them;
//   * raw headerless little-endian uint16 files (nanoGPT's train.bin), and
//     raw uint32 files (Format::Raw32, only when asked for: a uint32 file
//     is also a valid uint16 one);
//   * NumPy .npy arrays of uint16, uint32 or int32 (any shape, C order,
//     read flat);
//   * any text file, tokenized as bytes (vocabulary 256).
//
// Format::Auto picks llm.c when the file starts with either llm.c magic
// and .npy when it starts with NumPy's; a file laid out as an llm.c shard
// with another magic (the 253 reserved header int32 zero, the token count
// matching the file size) is an error naming the magic; anything else is
// raw uint16. Auto never guesses text (pass Format::Text / --text) nor raw
// uint32 (pass Format::Raw32 / --data-format raw32).
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
  Auto,  ///< llm.c or .npy by their magic, an error if the file is laid out
         ///< as an llm.c shard with another magic, else raw uint16.
  LlmC,  ///< llm.c shard (header + uint16 or uint32); a bad magic is an error.
  Raw,   ///< headerless uint16.
  Raw32, ///< headerless uint32.
  Npy,   ///< a NumPy .npy array of uint16, uint32 or int32.
  Text,  ///< bytes of any file, vocabulary 256.
};

/// "auto", "llmc" (also "llm.c"), "raw", "raw32", "npy", "text"; anything
/// else throws DataError listing the accepted names.
Format parseFormat(std::string_view name);
std::string_view formatName(Format format);

/// GPT-2 shards: uint16 tokens.
inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
/// Llama 3 shards: uint32 tokens (llm.c's "llama-3" header).
inline constexpr int32_t kLlmc32Magic = 20240801;
inline constexpr int32_t kLlmc32Version = 7;
inline constexpr int64_t kLlmcHeaderInts = 256;
inline constexpr int64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;
/// Byte tokenization of text files.
inline constexpr int64_t kTextVocab = 256;

/// Tokens of one source, held in memory as uint32 (a uint16 file takes
/// twice its size in memory); loaders narrow them to the program's int32
/// after validateVocab has checked them against the vocabulary.
struct TokenStream {
  /// The file path, or a description of a generated stream; used in messages.
  std::string source;
  /// The format actually read (never Auto); Raw for generated streams.
  Format format = Format::Raw;
  /// Where token 0 starts in the file, and its width in bytes there; both 0
  /// for generated streams (messages then give no byte offset).
  int64_t headerBytes = 0;
  int64_t bytesPerToken = 0;
  std::vector<uint32_t> tokens;

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

/// Reads `path` in `format` (Text delegates to readTextFile). Throws DataError
/// for a missing or unreadable file, a truncated header, a bad magic or
/// version under Format::LlmC, a token count that disagrees with the file
/// size, a length that is not a whole number of tokens, an .npy header that
/// is not a flat C-order array of uint16, uint32 or int32 (or a negative
/// int32 id), and a file with no tokens.
TokenStream readTokenFile(const std::string &path, Format format = Format::Auto);

/// Every byte of `path` is one token (0..255). Throws DataError for a missing,
/// unreadable or empty file. The bytes are not checked to be valid UTF-8.
TokenStream readTextFile(const std::string &path);

/// Writes `tokens` as an llm.c shard / a raw file (little-endian): uint16
/// under GPT-2's header, or uint32 under Llama 3's. Throws DataError when
/// the file cannot be written.
void writeLlmcFile(const std::string &path, const std::vector<uint16_t> &tokens);
void writeLlmcFile(const std::string &path, const std::vector<uint32_t> &tokens);
void writeRawFile(const std::string &path, const std::vector<uint16_t> &tokens);
void writeRawFile(const std::string &path, const std::vector<uint32_t> &tokens);

/// Throws DataError naming the source, the first offending position (and its
/// byte offset in the file) and the id if any token is >= vocab.
void validateVocab(const TokenStream &stream, int64_t vocab);

} // namespace partition::runtime::data

#endif // PARTITION_RUNTIME_DATA_TOKENDATA_H
