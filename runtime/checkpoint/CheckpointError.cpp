//===- CheckpointError.cpp ------------------------------------------------===//

#include "runtime/checkpoint/CheckpointError.h"

namespace partition::runtime::checkpoint {

static std::string oneLine(std::string text) {
  for (char &c : text)
    if (c == '\n' || c == '\r')
      c = ' ';
  return text;
}

CheckpointError::CheckpointError(const std::string &message)
    : std::runtime_error(oneLine(message)) {}

} // namespace partition::runtime::checkpoint
