//===- OrError.h - a value or the one-line message why not ------*- C++ -*-===//
//
// The one result type of the MLIR-free code that can refuse its input
// (schedules, cluster files, ...): errors are values, reported by the caller
// as one line, never aborted on. (llvm::Expected would do, but the
// scheduling and planner libraries and the fuzz targets do not link LLVM,
// and its unchecked-error assertions fit the compiler better than a cost
// model that tries thousands of plans.)
//
// Header-only, standard library only.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SUPPORT_ORERROR_H
#define PARTITION_SUPPORT_ORERROR_H

#include <string>
#include <utility>
#include <variant>

namespace partition {

template <typename T> class OrError {
public:
  OrError(T value) : state(std::move(value)) {}
  static OrError failure(std::string message) {
    OrError result;
    result.state = Message{std::move(message)};
    return result;
  }
  explicit operator bool() const { return std::holds_alternative<T>(state); }
  const T &operator*() const { return std::get<T>(state); }
  T &operator*() { return std::get<T>(state); }
  const T *operator->() const { return &std::get<T>(state); }
  T *operator->() { return &std::get<T>(state); }
  /// The message (only when there is no value).
  const std::string &error() const { return std::get<Message>(state).text; }

private:
  struct Message {
    std::string text;
  };
  OrError() = default;
  std::variant<Message, T> state;
};

} // namespace partition

#endif // PARTITION_SUPPORT_ORERROR_H
