//===- fake_rt.cpp - host stand-ins for CUDA runtime calls -----------------===//
//
// Host stand-ins for the CUDA runtime calls (emulation only): device memory
// is host memory of exactly the requested size (so ASan sees overruns),
// streams are dummies, everything is synchronous.
#include <cuda_runtime_api.h>
#include <cstdlib>
#include <cstring>
#include <cstdio>
extern "C" {
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n) { return posix_memalign(p, 256, n ? n : 1) ? cudaErrorMemoryAllocation : cudaSuccess; }
cudaError_t cudaFree(void *p) { std::free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { std::memmove(d, s, n); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { std::memcpy(d, s, n); return cudaSuccess; }
cudaError_t cudaMemset(void *d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t *s) { static char dummy; *s = reinterpret_cast<cudaStream_t>(&dummy); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { static char buf[64]; snprintf(buf, sizeof buf, "emulated error %d", int(e)); return buf; }
}
