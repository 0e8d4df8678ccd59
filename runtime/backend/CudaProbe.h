//===- CudaProbe.h - which CUDA devices this process can use ----*- C++ -*-===//
//
// The run-time half of the backend choice (partition-run --backend): the
// CUDA runtime is linked statically where the toolkit was found at build
// time, and asked for devices here; without a driver or a GPU it answers
// with an error code, which is the signal to use the CPU backend. Nothing
// links the CUDA driver library itself.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_DEVICE_CUDAPROBE_H
#define PARTITION_RUNTIME_DEVICE_CUDAPROBE_H

#include <string>

namespace partition::runtime::device {

struct CudaDevices {
  /// Usable devices (0 when none).
  int count = 0;
  /// Why there are none: the CUDA runtime's message, or that the runtime
  /// was built without CUDA.
  std::string reason;
};

CudaDevices probeCudaDevices();

} // namespace partition::runtime::device

#endif // PARTITION_RUNTIME_DEVICE_CUDAPROBE_H
