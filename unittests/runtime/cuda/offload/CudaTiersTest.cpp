//===- CudaTiersTest.cpp - the CUDA backend's offload tiers ---------------===//
//
// runtime/backend/cuda/CudaTiers.cpp and CudaHostUpdates.cpp, the CUDA
// backend's offload, on a function shaped as --rt-offload-optimizer writes
// it (two updates, slices of sizes that end in partial blocks), run for
// three steps through the tiers' actions with the moments in the host or
// the NVMe tier, the parameter in the arena or (ZeRO-3) in a tier, and
// AdamW on the CPU or staged for the GPU's kernel. The parameters and
// moments must be bit for bit what the same kernel leaves without offload
// (the CPU kernel for CPU updates, the CUDA kernel on plain device buffers
// for staged ones), and a CPU update must never stage a moment into the
// arena.
//
// Label gpu (runtime-cuda-tiers): on a GPU, with real streams, events,
// pinned memory and host functions; without one it prints
// "partition-cuda-tiers-tests: skipped: REASON". The same source runs in
// the emulator (runtime-cuda-tiers-emulated, unittests/runtime/cuda/
// emulator): its synchronous runtime checks the data path, not the
// streams' overlap (program order is one valid order of what they run).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaTiers.h"
#include "runtime/backend/cpu/Kernels.h"
#include "runtime/backend/cuda/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>

using namespace partition::runtime;
using partition::runtime::cudabackend::CudaTiers;

namespace cuda = partition::runtime::cuda;

namespace {

constexpr uint64_t kBlock = 4096;

void check(cudaError_t error) {
  ASSERT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
}
uint64_t blocks(uint64_t bytes) {
  return (bytes + kBlock - 1) / kBlock * kBlock;
}

/// One tensor's update: its arena and tier buffers.
struct Tensor {
  int64_t size = 0;
  uint32_t param = 0, grad = 0, m = 0, v = 0, w = 0; // arena
  uint32_t M = 0, V = 0, W = 0;                      // tiers
  bool tierParam = false;
};

struct Case {
  Tier moments;
  /// Tier::Arena: the parameter stays in the arena.
  Tier param;
  bool cpuUpdates;
};

std::string nameOf(const Case &c) {
  return std::string("moments ") + tierName(c.moments) + ", parameter " +
         tierName(c.param) + ", AdamW on the " + (c.cpuUpdates ? "CPU" : "GPU");
}

class Builder {
public:
  Program program;
  Function function;
  uint64_t arenaBytes = 0;

  uint32_t buffer(const std::string &name, Tier tier, int64_t elements,
                  DType dtype = DType::F32) {
    BufferInfo info;
    info.name = name;
    info.tier = tier;
    info.dtype = dtype;
    info.shape = {elements};
    info.elements = elements;
    info.bytes = uint64_t(elements) * 4;
    info.role = name.rfind("moment1", 0) == 0   ? Role::Moment1
                : name.rfind("moment2", 0) == 0 ? Role::Moment2
                : name.rfind("param", 0) == 0   ? Role::Param
                                                : Role::Temporary;
    uint64_t &end = tier == Tier::Arena  ? arenaBytes
                    : tier == Tier::Host ? program.hostBytes
                                         : program.nvmeBytes;
    info.offset = end;
    end += blocks(info.bytes);
    program.buffers.push_back(info);
    return uint32_t(program.buffers.size() - 1);
  }
  size_t copy(bool write, uint32_t from, uint32_t to) {
    Instruction instruction;
    instruction.args = {from, to};
    TierCopy tierCopy;
    tierCopy.write = write;
    tierCopy.started = true;
    tierCopy.label = program.buffers[write ? to : from].name;
    instruction.tierCopy = tierCopy;
    function.instructions.push_back(instruction);
    return function.instructions.size() - 1;
  }
  void wait(size_t started) {
    Instruction instruction;
    instruction.waitFor = uint32_t(started);
    function.instructions.push_back(instruction);
  }
  void adamw(std::vector<uint32_t> args) {
    Instruction instruction;
    instruction.kernel = KernelId::AdamW;
    instruction.args = std::move(args);
    // beta1, beta2, epsilon, weight decay.
    instruction.floats = {0.9f, 0.95f, 1e-8f, 0.1f};
    function.instructions.push_back(instruction);
  }
};

std::vector<float> randomVector(int64_t size, std::mt19937 &random, float low,
                                float high) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(size_t(size), 0.0f);
  for (float &value : values)
    value = uniform(random);
  return values;
}

void runCase(const Case &c) {
  SCOPED_TRACE(nameOf(c));
  Builder b;
  uint32_t step = b.buffer("step", Tier::Arena, 1, DType::I32);
  uint32_t lr = b.buffer("lr", Tier::Arena, 1);
  std::vector<Tensor> tensors;
  for (int64_t size : {1000, 3000}) {
    std::string name = "t" + std::to_string(size);
    Tensor t;
    t.size = size;
    t.tierParam = c.param != Tier::Arena;
    t.param = t.tierParam ? 0 : b.buffer("param " + name, Tier::Arena, size);
    t.grad = b.buffer("grad " + name, Tier::Arena, size);
    t.M = b.buffer("moment1 " + name, c.moments, size);
    t.V = b.buffer("moment2 " + name, c.moments, size);
    t.m = b.buffer("staging m " + name, Tier::Arena, size);
    t.v = b.buffer("staging v " + name, Tier::Arena, size);
    if (t.tierParam) {
      t.W = b.buffer("param " + name, c.param, size);
      t.w = b.buffer("staging w " + name, Tier::Arena, size);
    }
    tensors.push_back(t);
  }
  // Both updates' reads ahead, then each update and its write-backs,
  // waited for at the end (the pass's shape with a budget that holds all).
  std::vector<std::vector<size_t>> reads(tensors.size()),
      writes(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor &t = tensors[i];
    if (t.tierParam)
      reads[i].push_back(b.copy(false, t.W, t.w));
    reads[i].push_back(b.copy(false, t.M, t.m));
    reads[i].push_back(b.copy(false, t.V, t.v));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor &t = tensors[i];
    for (size_t read : reads[i])
      b.wait(read);
    uint32_t w = t.tierParam ? t.w : t.param;
    b.adamw({w, t.grad, t.m, t.v, step, lr, w, t.m, t.v});
    if (t.tierParam)
      writes[i].push_back(b.copy(true, t.w, t.W));
    writes[i].push_back(b.copy(true, t.m, t.M));
    writes[i].push_back(b.copy(true, t.v, t.V));
  }
  for (const std::vector<size_t> &written : writes)
    for (size_t write : written)
      b.wait(write);

  std::filesystem::path directory =
      std::filesystem::temp_directory_path() /
      ("partition-cuda-tiers-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  OffloadOptions options;
  options.path = directory.string();
  options.tag = "test";
  cudaStream_t compute = nullptr;
  check(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  uint8_t *arena = nullptr;
  check(cudaMalloc(reinterpret_cast<void **>(&arena), b.arenaBytes));
  check(cudaMemset(arena, 0, b.arenaBytes));
  auto at = [&](uint32_t buffer) {
    return reinterpret_cast<float *>(arena + b.program.buffers[buffer].offset);
  };
  auto upload = [&](uint32_t buffer, const void *data) {
    check(cudaMemcpy(at(buffer), data, b.program.buffers[buffer].bytes,
                     cudaMemcpyHostToDevice));
  };
  auto download = [&](uint32_t buffer) {
    std::vector<float> values(size_t(b.program.buffers[buffer].elements));
    check(cudaMemcpy(values.data(), at(buffer), values.size() * 4,
                     cudaMemcpyDeviceToHost));
    return values;
  };
  const cpu::AdamWConfig cpuConfig{0.9f, 0.95f, 1e-8f, 0.1f};
  const cuda::AdamWConfig gpuConfig{0.9f, 0.95f, 1e-8f, 0.1f};
  const float rate = 3e-3f;
  {
    CudaTiers tiers(b.program, options, compute, c.cpuUpdates, "test");
    std::vector<CudaTiers::Action> actions =
        tiers.compileFunction(b.program, b.function, arena, "test");
    tiers.allocateStaging("test");
    size_t updates = 0;
    for (const CudaTiers::Action &action : actions)
      updates += action.kind == CudaTiers::Action::Kind::Update;
    EXPECT_EQ(updates, c.cpuUpdates ? tensors.size() : 0u);

    // The reference: the same kernel without offload (the CPU's on host
    // vectors, the GPU's on plain device buffers).
    struct Reference {
      std::vector<float> param, m, v;
      /// GPU: param, m, v, grad, step, lr.
      std::vector<void *> device;
    };
    std::mt19937 random(5);
    std::vector<Reference> references;
    for (const Tensor &t : tensors) {
      Reference r{randomVector(t.size, random, -1, 1),
                  randomVector(t.size, random, -0.1f, 0.1f),
                  randomVector(t.size, random, 0, 0.01f),
                  {}};
      // Initial values written through the backend's path (the tiers'
      // write) where they are tiered.
      if (t.tierParam)
        tiers.write(b.program.buffers[t.W], r.param.data());
      else
        upload(t.param, r.param.data());
      tiers.write(b.program.buffers[t.M], r.m.data());
      tiers.write(b.program.buffers[t.V], r.v.data());
      if (!c.cpuUpdates) {
        for (const std::vector<float> *values : {&r.param, &r.m, &r.v}) {
          void *memory = nullptr;
          check(cudaMalloc(&memory, t.size * 4));
          check(cudaMemcpy(memory, values->data(), t.size * 4,
                           cudaMemcpyHostToDevice));
          r.device.push_back(memory);
        }
        for (size_t bytes : {size_t(t.size) * 4, size_t(4), size_t(4)}) {
          void *memory = nullptr;
          check(cudaMalloc(&memory, bytes));
          r.device.push_back(memory);
        }
        check(cudaMemcpy(r.device[5], &rate, 4, cudaMemcpyHostToDevice));
      }
      references.push_back(std::move(r));
    }
    upload(lr, &rate);
    const std::vector<float> nan(4096, NAN);
    for (int32_t s = 1; s <= 3; ++s) {
      upload(step, &s);
      for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor &t = tensors[i];
        Reference &r = references[i];
        std::vector<float> grad = randomVector(t.size, random, -1, 1);
        upload(t.grad, grad.data());
        if (c.cpuUpdates) {
          cpu::adamw(r.param.data(), grad.data(), r.m.data(), r.v.data(), &s,
                     &rate, r.param.data(), r.m.data(), r.v.data(), t.size,
                     cpuConfig);
        } else {
          auto *d = reinterpret_cast<float **>(r.device.data());
          check(cudaMemcpy(d[3], grad.data(), t.size * 4,
                           cudaMemcpyHostToDevice));
          check(cudaMemcpy(d[4], &s, 4, cudaMemcpyHostToDevice));
          cuda::adamw(d[0], d[3], d[1], d[2], reinterpret_cast<int32_t *>(d[4]),
                      d[5], d[0], d[1], d[2], t.size, gpuConfig, compute);
        }
        // Staging a CPU update must never use.
        for (uint32_t staging : {t.m, t.v})
          check(cudaMemcpy(at(staging), nan.data(), t.size * 4,
                           cudaMemcpyHostToDevice));
      }
      for (size_t i = 0; i < b.function.instructions.size(); ++i) {
        const Instruction &instruction = b.function.instructions[i];
        if (actions[i].kind != CudaTiers::Action::Kind::None) {
          tiers.run(actions[i]);
          continue;
        }
        // The GPU's update, staged: after its copies' waits on `compute`.
        ASSERT_EQ(instruction.kernel, KernelId::AdamW);
        const std::vector<uint32_t> &a = instruction.args;
        cuda::adamw(at(a[0]), at(a[1]), at(a[2]), at(a[3]),
                    reinterpret_cast<int32_t *>(at(a[4])), at(a[5]), at(a[6]),
                    at(a[7]), at(a[8]), b.program.buffers[a[1]].elements,
                    gpuConfig, compute);
      }
      // As the backend's run() ends: the compute stream, then the tiers.
      check(cudaStreamSynchronize(compute));
      tiers.synchronize("test");
      for (const Tensor &t : tensors)
        for (uint32_t staging : {t.m, t.v})
          EXPECT_EQ(std::isnan(download(staging)[0]), c.cpuUpdates)
              << "step " << s << ": the staging of "
              << b.program.buffers[staging].name;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor &t = tensors[i];
      Reference &r = references[i];
      if (!c.cpuUpdates) {
        for (size_t k = 0; k < 3; ++k)
          check(cudaMemcpy((k == 0   ? r.param
                            : k == 1 ? r.m
                                     : r.v)
                               .data(),
                           r.device[k], t.size * 4, cudaMemcpyDeviceToHost));
        for (void *memory : r.device)
          check(cudaFree(memory));
      }
      std::vector<float> param(t.size), m(t.size), v(t.size);
      if (t.tierParam)
        tiers.read(b.program.buffers[t.W], param.data());
      else
        param = download(t.param);
      tiers.read(b.program.buffers[t.M], m.data());
      tiers.read(b.program.buffers[t.V], v.data());
      EXPECT_EQ(0, std::memcmp(param.data(), r.param.data(), t.size * 4))
          << "parameter of tensor " << i;
      EXPECT_EQ(0, std::memcmp(m.data(), r.m.data(), t.size * 4))
          << "moment1 of tensor " << i;
      EXPECT_EQ(0, std::memcmp(v.data(), r.v.data(), t.size * 4))
          << "moment2 of tensor " << i;
    }
  }
  check(cudaFree(arena));
  check(cudaStreamDestroy(compute));
  // The NVMe tier's file is removed with the tiers.
  EXPECT_TRUE(std::filesystem::is_empty(directory));
  std::filesystem::remove_all(directory);
}

TEST(CudaTiers, EveryTierAndUpdatePlaceGivesTheUpdateWithoutOffload) {
  for (Tier moments : {Tier::Host, Tier::Nvme})
    for (Tier param : {Tier::Arena, Tier::Host, Tier::Nvme})
      for (bool cpuUpdates : {true, false})
        runCase({moments, param, cpuUpdates});
}

} // namespace

int main(int argc, char **argv) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf(
        "partition-cuda-tiers-tests: skipped: %s\n",
        cudaGetErrorString(error != cudaSuccess ? error : cudaErrorNoDevice));
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
