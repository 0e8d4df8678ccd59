//===- Backend.h - where a program's arena lives and runs -------*- C++ -*-===//

#ifndef PARTITION_RUNTIME_BACKEND_H
#define PARTITION_RUNTIME_BACKEND_H

#include "runtime/Program.h"

#include <memory>

namespace partition::runtime {

/// Executes one program on one device. The arena and all buffers belong to
/// the backend; the host moves data in and out through read / write.
class Backend {
public:
  virtual ~Backend();
  virtual const char *name() const = 0;
  /// Copies `buffer`'s contents from host memory.
  virtual void write(const BufferInfo &buffer, const void *source) = 0;
  /// Copies `buffer`'s contents to host memory.
  virtual void read(const BufferInfo &buffer, void *destination) = 0;
  /// Runs every instruction of function `index` of the program once.
  virtual void run(size_t index) = 0;
  /// Bytes the backend holds beyond the arena (kernel workspaces).
  virtual uint64_t workspaceBytes() const = 0;
};

/// The CPU backend: OpenBLAS and OpenMP kernels on a host arena. Checks every
/// instruction's shapes first; throws ProgramError.
std::unique_ptr<Backend> createCpuBackend(const Program &program);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_BACKEND_H
