//===- HfFields.h - reading one JSON object field by field -*- C++ -*-===//
//
// The reader HfConfig.cpp and HfMoe.cpp share: each field read through it is
// type-checked and marked used, and every error names the field (escaped,
// so the message stays one line) after a prefix saying which file and
// object it came from. Internal to interop/.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_INTEROP_HFFIELDS_H
#define PARTITION_INTEROP_HFFIELDS_H

#include "interop/InteropError.h"
#include "support/JsonReader.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace partition::interop {

using nlohmann::json;

inline std::string show(const json &value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// Reads the fields of one JSON object, each error naming the field.
class Fields {
public:
  /// `prefix` starts every error, followed by the key.
  Fields(const json &object, std::string prefix)
      : object(object), prefix(std::move(prefix)) {}

  bool has(const std::string &key) const {
    return object.contains(key) && !object.at(key).is_null();
  }

  [[noreturn]] void refuse(const std::string &key,
                           const std::string &problem) const {
    // Keys come from the file: escaped, so that the message is one line.
    throw InteropError(prefix + jsonreader::showKey(key) + " " + problem);
  }

  /// A positive integer; `fallback` (the transformers default) when absent.
  int64_t positive(const std::string &key,
                   std::optional<int64_t> fallback = std::nullopt) {
    used.insert(key);
    if (!has(key)) {
      if (fallback)
        return *fallback;
      refuse(key, "is missing; it must be a positive integer");
    }
    const json &value = object.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() <= 0)
      refuse(key, "must be a positive integer, got " + show(value));
    return value.get<int64_t>();
  }

  /// A non-negative integer; `fallback` when absent.
  int64_t nonNegative(const std::string &key, int64_t fallback) {
    used.insert(key);
    if (!has(key))
      return fallback;
    const json &value = object.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() < 0)
      refuse(key, "must be a non-negative integer, got " + show(value));
    return value.get<int64_t>();
  }

  std::optional<int64_t> optionalPositive(const std::string &key) {
    if (!has(key)) {
      used.insert(key);
      return std::nullopt;
    }
    return positive(key);
  }

  bool boolean(const std::string &key, bool fallback) {
    used.insert(key);
    if (!has(key))
      return fallback;
    const json &value = object.at(key);
    if (!value.is_boolean())
      refuse(key, "must be true or false, got " + show(value));
    return value.get<bool>();
  }

  std::string string(const std::string &key, const std::string &fallback) {
    used.insert(key);
    if (!has(key))
      return fallback;
    const json &value = object.at(key);
    if (!value.is_string())
      refuse(key, "must be a string, got " + show(value));
    return value.get<std::string>();
  }

  double number(const std::string &key, double fallback) {
    used.insert(key);
    if (!has(key))
      return fallback;
    const json &value = object.at(key);
    if (!value.is_number())
      refuse(key, "must be a number, got " + show(value));
    return value.get<double>();
  }

  /// Refuses `key` unless it equals `expected` (absent: `fallback`).
  void requireBool(const std::string &key, bool fallback, bool expected,
                   const std::string &why) {
    if (boolean(key, fallback) != expected)
      refuse(key, "= " + std::string(expected ? "false" : "true") +
                      " cannot be expressed: " + why);
  }

  void requireNumber(const std::string &key, double fallback, double expected,
                     const std::string &why) {
    double value = number(key, fallback);
    if (value != expected)
      refuse(key, "= " + (has(key) ? show(object.at(key)) : show(fallback)) +
                      (has(key) ? "" : " (the transformers default)") +
                      " cannot be expressed: " + why);
  }

  const json &object;
  std::string prefix;
  std::set<std::string> used;
};

} // namespace partition::interop

#endif // PARTITION_INTEROP_HFFIELDS_H
