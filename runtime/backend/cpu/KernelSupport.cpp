//===- KernelSupport.cpp - helpers shared by the CPU kernels --------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cblas.h>

#include <climits>
#include <cstdlib>
#include <new>
#include <stdexcept>

namespace partition::runtime::cpu::detail {

namespace {
struct AlignedBuffer {
  void *data = nullptr;
  std::size_t capacity = 0;
  ~AlignedBuffer() { std::free(data); }
};
} // namespace

void *threadScratch(std::size_t bytes, unsigned slot) {
  thread_local AlignedBuffer buffers[kScratchSlots];
  if (slot >= kScratchSlots)
    fail("threadScratch", "scratch slot out of range");
  AlignedBuffer &buffer = buffers[slot];
  if (bytes > buffer.capacity) {
    std::size_t rounded = (bytes + 63) / 64 * 64;
    void *fresh = std::aligned_alloc(64, rounded);
    if (!fresh)
      throw std::bad_alloc();
    std::free(buffer.data);
    buffer.data = fresh;
    buffer.capacity = rounded;
  }
  return buffer.data;
}

SerialBlasScope::SerialBlasScope(bool active) {
  // openblas_get_parallel(): 0 sequential build, 1 pthreads, 2 OpenMP.
  if (!active || openblas_get_parallel() != 1)
    return;
  int threads = openblas_get_num_threads();
  if (threads > 1) {
    savedThreads = threads;
    openblas_set_num_threads(1);
  }
}

SerialBlasScope::~SerialBlasScope() {
  if (savedThreads > 1)
    openblas_set_num_threads(savedThreads);
}

void fail(const char *kernel, const std::string &message) {
  throw std::invalid_argument(std::string(kernel) + ": " + message);
}

void checkNonNegative(const char *kernel, std::initializer_list<Index> sizes) {
  for (Index size : sizes)
    if (size < 0)
      fail(kernel, "negative size " + std::to_string(size));
}

int blasInt(const char *kernel, Index value) {
  if (value < 0 || value > INT_MAX)
    fail(kernel, "dimension " + std::to_string(value) +
                     " does not fit a BLAS int");
  return static_cast<int>(value);
}

void checkIds(const char *kernel, const char *what, const std::int32_t *ids,
              Index count, Index limit) {
  // A cheap serial pre-pass, so that a bad id throws before any output is
  // written instead of corrupting memory inside a parallel region.
  for (Index i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= limit)
      fail(kernel, std::string(what) + "[" + std::to_string(i) + "] = " +
                       std::to_string(ids[i]) + " is outside [0, " +
                       std::to_string(limit) + ")");
}

} // namespace partition::runtime::cpu::detail
