//===- emu.h - a cooperative SIMT emulator for the CUDA kernels -*- C++ -*-===//
//
// Cooperative SIMT emulator for runtime/backend/cuda/kernels (CPU only).
// One block at a time; every CUDA thread is a coroutine on its own stack
// (made with makecontext, entered once with setcontext, then switched with
// _setjmp / _longjmp: swapcontext saves and restores the signal mask, a
// system call per switch, which was 30 of the attention test's 73 s; under
// AddressSanitizer, which follows swapcontext but not a longjmp to another
// stack, every switch is a swapcontext). Block
// barriers (__syncthreads) and warp barriers (inside __shfl_xor_sync) are
// real: a thread runs until it reaches one, and is released only when every
// thread of the block (resp. all 32 lanes of its warp) has reached it.
// Divergence (some threads at a barrier while others exited or wait at a
// different kind of barrier) aborts. Shared memory is filled with NaN bytes
// at the start of every block. Thread order per pass: forward, reverse or
// shuffled (EMU_ORDER=fwd|rev|rand).
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <vector_functions.h>
#include <ucontext.h>
#include <csetjmp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace emu {
enum State { Ready, AtBlock, AtWarp, Done };
struct Thread {
  ucontext_t ctx;     // where it starts (and waits, under ASan)
  std::jmp_buf where; // where it waits at a barrier
  bool started = false;
  State st = Ready;
};
/// Where runBlock resumes when the running thread waits or ends.
inline std::jmp_buf scheduler;
inline ucontext_t schedulerContext;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSwapcontext = true;
#else
constexpr bool kSwapcontext = false;
#endif
inline std::vector<Thread> threads;
inline std::vector<std::unique_ptr<char[]>> stacks;
inline int current = 0;
inline uint3 tIdx, bIdx;
inline dim3 bDim, gDim;
inline std::function<void()> body;
inline unsigned long long shuffleBuf[1024];
inline int order = [] { // 0 forward, 1 reverse, 2 random (EMU_ORDER)
  const char *o = std::getenv("EMU_ORDER");
  return !o ? 0 : !std::strcmp(o, "rev") ? 1 : !std::strcmp(o, "rand") ? 2 : 0;
}();
inline std::mt19937 orderRng(12345);
inline long switches = 0, blocksRun = 0, launches = 0;
inline long blockGen = 0;
inline std::unique_ptr<char[]> dynSmem;
inline std::size_t dynBytes = 0;
inline std::map<const void *, long> sharedGen;
inline std::map<const void *, std::size_t> launchStatic;
inline std::map<const void *, int> maxDynAttr;
inline cudaError_t lastError = cudaSuccess;
inline long failures = 0;
constexpr std::size_t kStack = 128 * 1024;

[[noreturn]] inline void die(const char *what) {
  std::fprintf(stderr, "EMU FATAL: %s (block %u,%u thread %d)\n", what, bIdx.x,
               bIdx.y, current);
  std::abort();
}

inline void yieldAs(State s) {
  ++switches;
  threads[current].st = s;
  if (kSwapcontext)
    swapcontext(&threads[current].ctx, &schedulerContext);
  else if (!_setjmp(threads[current].where))
    _longjmp(scheduler, 1);
}
inline void syncthreads() { yieldAs(AtBlock); }
inline void syncwarp() { yieldAs(AtWarp); }

template <typename V> V shflXor(V v, int off) {
  static_assert(sizeof(V) <= 8);
  const int t = current;
  std::memcpy(&shuffleBuf[t], &v, sizeof(V));
  syncwarp();
  V y;
  const int src = (t & ~31) | ((t & 31) ^ off);
  if (src >= int(threads.size())) die("shuffle source lane outside block");
  std::memcpy(&y, &shuffleBuf[src], sizeof(V));
  syncwarp();
  return y;
}

inline void trampoline() {
  body();
  threads[current].st = Done;
  if (!kSwapcontext)
    _longjmp(scheduler, 1); // its stack is done; else uc_link resumes
}

inline void runBlock(int n) {
  if (int(stacks.size()) < n)
    for (int i = int(stacks.size()); i < n; ++i)
      stacks.emplace_back(new char[kStack]);
  threads.assign(n, Thread{});
  for (int i = 0; i < n; ++i) {
    Thread &t = threads[i];
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = stacks[i].get();
    t.ctx.uc_stack.ss_size = kStack;
    t.ctx.uc_link = &schedulerContext;
    makecontext(&t.ctx, trampoline, 0);
    t.started = false;
    t.st = Ready;
  }
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = order == 1 ? n - 1 - i : i;
  for (;;) {
    if (order == 2) std::shuffle(perm.begin(), perm.end(), orderRng);
    for (int k = 0; k < n; ++k) {
      const int i = perm[k];
      if (threads[i].st != Ready) continue;
      current = i;
      tIdx = uint3{unsigned(i), 0, 0};
      if (kSwapcontext) {
        swapcontext(&schedulerContext, &threads[i].ctx);
      } else if (!_setjmp(scheduler)) {
        if (!threads[i].started) {
          threads[i].started = true;
          setcontext(&threads[i].ctx);
        }
        _longjmp(threads[i].where, 1);
      }
    }
    int done = 0, atBlock = 0, atWarp = 0;
    for (auto &t : threads) {
      done += t.st == Done;
      atBlock += t.st == AtBlock;
      atWarp += t.st == AtWarp;
    }
    if (done == n) return;
    if (atWarp > 0) {
      for (int w = 0; w * 32 < n; ++w) {
        int lanes = std::min(32, n - w * 32), waiting = 0;
        for (int l = 0; l < lanes; ++l) waiting += threads[w * 32 + l].st == AtWarp;
        if (waiting == lanes) {
          for (int l = 0; l < lanes; ++l) threads[w * 32 + l].st = Ready;
        } else if (waiting > 0) {
          current = w * 32;
          die("warp divergence: some lanes at a full-mask shuffle, others "
              "exited or at __syncthreads");
        }
      }
      continue;
    }
    if (done > 0) die("__syncthreads reached by some threads after others exited");
    for (auto &t : threads) t.st = Ready;
  }
}

/// Static __shared__ variables: NaN bytes at the start of each block.
template <typename T> T &fresh(T &x) {
  long &g = sharedGen[&x];
  if (g != blockGen) {
    std::memset(static_cast<void *>(&x), 0xFF, sizeof(T));
    g = blockGen;
    launchStatic[&x] = sizeof(T);
  }
  return x;
}
template <typename T> T *dynamicShared() {
  if (!dynSmem) die("extern __shared__ used with 0 dynamic bytes");
  return reinterpret_cast<T *>(dynSmem.get());
}

inline dim3 toDim(dim3 d) { return d; }
inline dim3 toDim(unsigned x) { return dim3(x); }
inline dim3 toDim(int x) { return dim3(unsigned(x)); }
inline dim3 toDim(long x) { return dim3(unsigned(x)); }

template <typename F> struct Launch {
  F f;
  dim3 grid, block;
  std::size_t bytes;
  template <typename... A> void operator()(A... args) {
    ++launches;
    const unsigned n = block.x * block.y * block.z;
    if (block.y != 1 || block.z != 1 || grid.z != 1) die("emulator: 1-D blocks, 2-D grids only");
    if (n == 0 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.y > 65535 ||
        grid.x > 0x7fffffffu) {
      std::fprintf(stderr, "EMU: invalid launch configuration grid (%u,%u) block %u\n",
                   grid.x, grid.y, n);
      lastError = cudaErrorInvalidConfiguration;
      ++failures;
      return;
    }
    const void *key = reinterpret_cast<const void *>(f);
    auto attr = maxDynAttr.find(key);
    launchStatic.clear();
    // Blocks run one at a time, in reverse grid order too with EMU_ORDER=rev
    // (a result that depends on block order would show up).
    for (unsigned byi = 0; byi < grid.y; ++byi)
      for (unsigned bxi = 0; bxi < grid.x; ++bxi) {
        const unsigned by = order == 1 ? grid.y - 1 - byi : byi;
        const unsigned bx = order == 1 ? grid.x - 1 - bxi : bxi;
        ++blockGen;
        ++blocksRun;
        dynBytes = bytes;
        dynSmem.reset(bytes ? new char[bytes] : nullptr);
        if (bytes) std::memset(dynSmem.get(), 0xFF, bytes);
        bIdx = uint3{bx, by, 0};
        bDim = block;
        gDim = grid;
        body = [&] { f(args...); };
        runBlock(int(n));
        if (bxi == 0 && byi == 0) {
          std::size_t st = 0;
          for (auto &kv : launchStatic) st += kv.second;
          const std::size_t limit =
              attr != maxDynAttr.end() ? std::size_t(attr->second) : 48 * 1024 - st;
          if (bytes > limit || bytes + st > 227 * 1024) {
            std::fprintf(stderr,
                         "EMU: launch would fail on the device: %zu dynamic + %zu "
                         "static shared bytes, dynamic limit %zu\n",
                         bytes, st, limit);
            lastError = cudaErrorInvalidValue;
            ++failures;
          }
        }
      }
    dynSmem.reset();
  }
};
template <typename F, typename G, typename B>
Launch<F> launch(F f, G grid, B block, std::size_t bytes = 0, cudaStream_t = nullptr) {
  return Launch<F>{f, toDim(grid), toDim(block), bytes};
}

inline cudaError_t getLastError() {
  cudaError_t e = lastError;
  lastError = cudaSuccess;
  return e;
}
template <typename K> cudaError_t funcSetAttribute(K *kernel, cudaFuncAttribute a, int value) {
  if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > 227 * 1024) return cudaErrorInvalidValue;
    maxDynAttr[reinterpret_cast<const void *>(kernel)] = value;
  }
  return cudaSuccess;
}

inline float uintAsFloat(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float fmulRn(float a, float b) {
  volatile float r = a * b; // no contraction into a following add
  return r;
}
} // namespace emu

inline int min(int a, int b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }

// Globals (not macros): host parameters named blockDim shadow them, as in CUDA.
inline uint3 &threadIdx = emu::tIdx;
inline uint3 &blockIdx = emu::bIdx;
inline dim3 &blockDim = emu::bDim;
inline dim3 &gridDim = emu::gDim;
#define __syncthreads() emu::syncthreads()
#define __shfl_xor_sync(mask, x, off) emu::shflXor((x), (off))
#define cudaGetLastError() emu::getLastError()
#define cudaFuncSetAttribute(k, a, v) emu::funcSetAttribute((k), (a), (v))
#define __uint_as_float(u) emu::uintAsFloat(u)
#define __fmul_rn(a, b) emu::fmulRn((a), (b))
#define EMU_SHARED(name, ...)                                                  \
  static __VA_ARGS__ name##_storage;                                           \
  __VA_ARGS__ &name = emu::fresh(name##_storage)
#define EMU_SHARED_ARR(name, n, ...)                                           \
  static __VA_ARGS__ name##_storage[n];                                        \
  auto &name = emu::fresh(name##_storage)
