//===- CublasLibrary.h - cuBLAS and cuBLASLt, loaded on first use -*- C++ -*-===//
//
// The CUDA backend's GEMMs call cuBLAS and cuBLASLt through their usual
// headers; PartitionCublas (CublasLibrary.cpp) defines those entry points
// and loads the libraries with dlopen the first time one is called, so that
// a process that never runs the CUDA backend never loads them (their static
// initialisers alone cost every CPU rank 95 ms at start-up).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_CUDA_CUBLAS_CUBLASLIBRARY_H
#define PARTITION_RUNTIME_BACKEND_CUDA_CUBLAS_CUBLASLIBRARY_H

#include <string>

namespace partition::runtime::cuda {

/// Loads libcublas and libcublasLt (once per process; later calls return
/// the first answer). Returns "" when both loaded, else what is missing and
/// where it was looked for, for an error message: the backend calls this
/// before its first cuBLAS call.
const std::string &loadCublas();

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_BACKEND_CUDA_CUBLAS_CUBLASLIBRARY_H
