//===- CudaBackend.h - runs a program on one CUDA device --------*- C++ -*-===//
//
// The GPU counterpart of the CPU backend (runtime/backend/cpu/CpuBackend.cpp): the arena
// is one cudaMalloc on `device`, every instruction is checked with
// checkInstruction() and compiled once into a launch on the backend's
// compute stream (runtime/backend/cuda/kernels, runtime/backend/cuda/attention, cuBLASLt
// for the linear layers), and collectives are NCCL operations on their
// group's communication stream, ordered by CUDA events against the compute
// stream only where their byte ranges in the arena overlap a later
// kernel's, so communication overlaps compute. run() returns with the step
// complete.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_CUDABACKEND_H
#define PARTITION_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/backend/Backend.h"

#include <memory>

namespace partition::runtime {

/// `communicators`: the groups of the program's mesh over a world of
/// comm::NcclCommunicator on `device` (required when the program has
/// collectives; must outlive the backend); the offload's tiers as `offload`
/// says (runtime/backend/cuda/CudaTiers.h). Makes `device` current for the
/// calling thread. Throws ProgramError (a bad program, a CUDA or cuBLAS
/// error, too little device memory).
std::unique_ptr<Backend>
createCudaBackend(const Program &program,
                  const comm::MeshCommunicators *communicators, int device,
                  const OffloadOptions &offload);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_CUDA_CUDABACKEND_H
