//===- JsonReader.h - the one way the tools read a JSON file ----*- C++ -*-===//
//
// Every JSON file a tool reads (plan.json, cluster files, transformers
// configs and indexes) goes through scanJson before any DOM is built: a pass
// with nlohmann-json's SAX parser, which does not recurse and reports errors
// by return value (the tools are built without exceptions, so
// nlohmann::json::parse's exceptions would abort). It refuses, with one
// line:
//  - an empty file (nothing but blanks),
//  - invalid JSON (the parser's message, without its "[json.exception...]"
//    tag),
//  - a number beyond the range of a double (1e400: nlohmann would report
//    an exception; llvm::json would read inf),
//  - a key given twice in one object (both DOM parsers keep one silently),
//  - nesting deeper than `maxDepth`.
// parseJson then builds the nlohmann DOM of a text scanJson accepted.
//
// Header-only (nlohmann-json and the standard library), so that the fuzz
// targets, which compile their readers' sources directly, need no library.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SUPPORT_JSONREADER_H
#define PARTITION_SUPPORT_JSONREADER_H

#include <nlohmann/json.hpp>

#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace partition::jsonreader {

/// Deeper than any file the tools read.
constexpr size_t kDefaultMaxDepth = 32;

/// A key or path as messages show it: control characters escaped (a message
/// is one line), long ones cut.
inline std::string showKey(std::string_view key) {
  bool cut = key.size() > 60;
  std::string text;
  for (char c : cut ? key.substr(0, 57) : key) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '\\' || c == '"') {
      text += '\\';
      text += c;
    } else if (std::isprint(byte)) {
      text += c;
    } else {
      static const char *hex = "0123456789ABCDEF";
      text += '\\';
      text += hex[byte >> 4];
      text += hex[byte & 15];
    }
  }
  if (cut)
    text += "...";
  return text;
}

namespace detail {

/// The SAX handler: records the first problem and stops there.
class Scan {
public:
  explicit Scan(size_t maxDepth) : maxDepth(maxDepth) {}
  std::string problem;

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(nlohmann::json::number_integer_t) { return value(); }
  bool number_unsigned(nlohmann::json::number_unsigned_t) { return value(); }
  bool number_float(nlohmann::json::number_float_t, const std::string &) {
    return value();
  }
  bool string(std::string &) { return value(); }
  bool binary(nlohmann::json::binary_t &) { return value(); }
  bool start_object(std::size_t) { return open(/*object=*/true); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(/*object=*/false); }
  bool end_array() { return close(); }
  bool key(std::string &key) {
    Level &level = levels.back();
    if (!level.keys.insert(key).second) {
      problem = "the key '" + join(level.path, key) +
                "' is given twice; give each key once";
      return false;
    }
    level.key = key;
    return true;
  }
  bool parse_error(std::size_t, const std::string &token,
                   const nlohmann::detail::exception &error) {
    // 406: a number beyond a double's range ("1e400").
    if (error.id == 406) {
      problem = "the number " + showKey(token) +
                " is out of range (beyond a double's +-1.8e308)";
      return false;
    }
    std::string what = error.what();
    // "[json.exception.parse_error.101] parse error at ...": drop the tag.
    if (size_t tag = what.find("] "); what.rfind("[json.exception.", 0) == 0 &&
                                      tag != std::string::npos)
      what = what.substr(tag + 2);
    problem = "invalid JSON: " + what;
    return false;
  }

private:
  struct Level {
    bool object;
    std::string path;
    std::set<std::string> keys;
    std::string key;
    size_t elements = 0;
  };
  size_t maxDepth;
  std::vector<Level> levels;

  static std::string join(const std::string &path, std::string_view key) {
    return path.empty() ? showKey(key) : path + "." + showKey(key);
  }
  /// The path of the value that starts now: "mesh.dp", "mesh[2]".
  std::string child() {
    if (levels.empty())
      return "";
    Level &level = levels.back();
    if (level.object)
      return join(level.path, level.key);
    return level.path + "[" + std::to_string(level.elements++) + "]";
  }
  bool value() {
    (void)child();
    return true;
  }
  bool open(bool object) {
    std::string path = child();
    if (levels.size() >= maxDepth) {
      problem = "'" + path + "' is nested more than " +
                std::to_string(maxDepth) + " levels deep";
      return false;
    }
    levels.push_back(Level{object, std::move(path), {}, {}, 0});
    return true;
  }
  bool close() {
    levels.pop_back();
    return true;
  }
};

} // namespace detail

/// Whether `text` is nothing but JSON whitespace.
inline bool isBlank(std::string_view text) {
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      return false;
  return true;
}

/// The first problem of `text` as one line (see the file comment), or
/// nullopt when it is well-formed JSON that any DOM parser reads safely.
inline std::optional<std::string>
scanJson(std::string_view text, size_t maxDepth = kDefaultMaxDepth) {
  if (isBlank(text))
    return std::string("the file is empty");
  detail::Scan scan(maxDepth);
  if (!nlohmann::json::sax_parse(text.begin(), text.end(), &scan))
    return scan.problem.empty() ? std::string("invalid JSON") : scan.problem;
  return std::nullopt;
}

/// scanJson, then nlohmann's DOM (without exceptions). On failure `problem`
/// holds the one line and the result is nullopt.
inline std::optional<nlohmann::json>
parseJson(std::string_view text, std::string &problem,
          size_t maxDepth = kDefaultMaxDepth) {
  if (std::optional<std::string> found = scanJson(text, maxDepth)) {
    problem = *found;
    return std::nullopt;
  }
  nlohmann::json parsed = nlohmann::json::parse(text.begin(), text.end(),
                                                nullptr,
                                                /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    problem = "invalid JSON";
    return std::nullopt;
  }
  return parsed;
}

} // namespace partition::jsonreader

#endif // PARTITION_SUPPORT_JSONREADER_H
