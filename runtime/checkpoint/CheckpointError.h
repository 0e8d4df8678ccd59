//===- CheckpointError.h - the one error checkpoint code throws -*- C++ -*-===//
//
// Every failure of the checkpoint library (an unreadable or corrupt file, a
// tensor the caller asks for that is not there, a write that could not
// complete) is a CheckpointError whose what() is one line naming the file, the
// problem and what to do about it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CHECKPOINT_CHECKPOINTERROR_H
#define PARTITION_RUNTIME_CHECKPOINT_CHECKPOINTERROR_H

#include <stdexcept>
#include <string>

namespace partition::runtime::checkpoint {

class CheckpointError : public std::runtime_error {
public:
  /// `message` is made one line: line breaks become spaces.
  explicit CheckpointError(const std::string &message);
};

} // namespace partition::runtime::checkpoint

#endif // PARTITION_RUNTIME_CHECKPOINT_CHECKPOINTERROR_H
