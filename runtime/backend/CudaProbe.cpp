//===- CudaProbe.cpp - which CUDA devices this process can use ------------===//

#include "runtime/backend/CudaProbe.h"

#ifdef PARTITION_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace partition::runtime::device {

CudaDevices probeCudaDevices() {
#ifdef PARTITION_HAVE_CUDA
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    return {0, std::string(cudaGetErrorName(status)) + ": " +
                   cudaGetErrorString(status)};
  if (count == 0)
    return {0, "the CUDA runtime sees no device"};
  return {count, ""};
#else
  return {0, "this partition-run was built without CUDA (no CUDA toolkit "
             "when it was configured)"};
#endif
}

} // namespace partition::runtime::device
