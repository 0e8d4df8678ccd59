//===- NcclInternal.h - what NcclCommunicator's sources share ---*- C++ -*-===//
//
// Included by NcclCommunicator.cpp and NcclEnqueue.cpp only: the mapping of
// the communicator's types onto NCCL's and the scope that makes the
// communicator's device current for one operation.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_COMM_NCCLINTERNAL_H
#define PARTITION_RUNTIME_COMM_NCCLINTERNAL_H

#include "runtime/comm/NcclCommunicator.h"

namespace partition::runtime::comm {

inline ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return ncclSum;
  case ReduceOp::Avg:
    return ncclAvg;
  case ReduceOp::Max:
    return ncclMax;
  }
  return ncclSum;
}

inline ncclDataType_t ncclType(DataType type) {
  switch (type) {
  case DataType::F32:
    return ncclFloat32;
  case DataType::BF16:
    return ncclBfloat16;
  case DataType::I32:
    return ncclInt32;
  }
  return ncclFloat32;
}

class NcclCommunicator::DeviceScope {
public:
  DeviceScope(const NcclCommunicator &comm, const char *op, const Context &ctx)
      : device_(comm.device_) {
    comm.checkCuda(cudaGetDevice(&previous_), "cudaGetDevice", op, ctx);
    if (previous_ != device_)
      comm.checkCuda(cudaSetDevice(device_), "cudaSetDevice", op, ctx);
  }
  ~DeviceScope() {
    if (previous_ != device_)
      cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;

private:
  int device_;
  int previous_ = 0;
};

} // namespace partition::runtime::comm

#endif // PARTITION_RUNTIME_COMM_NCCLINTERNAL_H
