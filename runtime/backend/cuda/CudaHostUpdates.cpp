//===- CudaHostUpdates.cpp - AdamW on the CPU for a GPU rank --------------===//

#include "runtime/backend/cuda/CudaHostUpdates.h"

#include "runtime/backend/cpu/Kernels.h"
#include "runtime/backend/cuda/CudaTiers.h"

#include <algorithm>
#include <exception>

namespace partition::runtime::cudabackend {

namespace {

/// The scratch's parts, each at a 256-byte boundary (the copies' and the
/// CPU kernel's vectors like alignment).
uint64_t partBytes(int64_t elements) {
  return (uint64_t(elements) * sizeof(float) + 255) / 256 * 256;
}

} // namespace

CudaHostUpdates::CudaHostUpdates(CudaTiers &tiers, cudaStream_t compute,
                                 const std::string &setup)
    : tiers(tiers), compute(compute) {
  // Non-blocking, as the compute stream.
  if (cudaStreamCreateWithFlags(&updateStream, cudaStreamNonBlocking) !=
      cudaSuccess)
    throw ProgramError(setup + ": cudaStreamCreateWithFlags failed for the "
                               "CPU's AdamW updates");
}

CudaHostUpdates::~CudaHostUpdates() {
  if (cudaStreamSynchronize(updateStream) == cudaErrorCudartUnloading)
    return;
  for (const auto &update : updates)
    if (update->finished)
      cudaEventDestroy(update->finished);
  if (ready)
    cudaEventDestroy(ready);
  if (scratch)
    cudaFreeHost(scratch);
  cudaStreamDestroy(updateStream);
}

size_t CudaHostUpdates::compile(const Program &program,
                                const cuda::HostUpdate &planned,
                                const std::vector<float> &floats,
                                uint8_t *arena,
                                const std::map<size_t, size_t> &tierCopies,
                                const std::string &name,
                                const std::string &setup) {
  auto device = [&](uint32_t buffer) {
    return arena + program.buffers[buffer].offset;
  };
  const BufferInfo &gradient = program.buffers[planned.gradient];
  // The loader checked adamw's operands; the CPU kernel reads them as fp32
  // of one size and a scalar learning rate, so say so if that ever changes.
  bool fits = program.buffers[planned.lr].elements == 1;
  uint32_t param =
      planned.tierParam ? planned.tierParam->tierBuffer : planned.param;
  for (uint32_t buffer : {param, planned.gradient, planned.moment1.tierBuffer,
                          planned.moment2.tierBuffer, planned.lr})
    fits = fits && program.buffers[buffer].dtype == DType::F32;
  for (uint32_t buffer :
       {param, planned.moment1.tierBuffer, planned.moment2.tierBuffer})
    fits = fits && program.buffers[buffer].elements == gradient.elements;
  if (!fits)
    throw ProgramError(name +
                       ": an AdamW update on the CPU needs fp32 "
                       "operands of one size (the parameter, gradient and "
                       "moments) and a scalar learning rate");
  auto update = std::make_unique<Update>();
  update->name = name;
  update->gradient = reinterpret_cast<float *>(device(planned.gradient));
  update->step = reinterpret_cast<int32_t *>(device(planned.step));
  update->lr = reinterpret_cast<float *>(device(planned.lr));
  // A host-tier operand is read where it is; an NVMe one in its read's
  // pinned block, known once the blocks are allocated (enqueue).
  auto bind = [&](const cuda::TierOperand &operand, float *&data,
                  size_t &copy) {
    if (operand.tier == Tier::Host)
      data = tiers.hostTierData(program.buffers[operand.tierBuffer]);
    else
      copy = tierCopies.at(operand.read);
  };
  bind(planned.moment1, update->moment1, update->moment1Copy);
  bind(planned.moment2, update->moment2, update->moment2Copy);
  if (planned.tierParam)
    bind(*planned.tierParam, update->hostParam, update->paramCopy);
  else
    update->param = reinterpret_cast<float *>(device(planned.param));
  if (cudaEventCreateWithFlags(&update->finished, cudaEventDisableTiming) !=
      cudaSuccess)
    throw ProgramError(setup + ": cudaEventCreateWithFlags failed");
  update->size = gradient.elements;
  // adamw's floats: beta1, beta2, epsilon, weight decay (Kernels.def).
  update->beta1 = floats.at(0);
  update->beta2 = floats.at(1);
  update->epsilon = floats.at(2);
  update->weightDecay = floats.at(3);
  update->owner = this;
  largest = std::max(largest, update->size);
  updates.push_back(std::move(update));
  return updates.size() - 1;
}

void CudaHostUpdates::allocate(const std::string &setup) {
  uint64_t bytes = 2 * partBytes(largest) + 256;
  void *memory = nullptr;
  if (cudaHostAlloc(&memory, bytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    throw ProgramError(setup + ": cannot allocate " + std::to_string(bytes) +
                       " bytes of pinned host memory for the CPU's AdamW "
                       "updates (cudaHostAlloc)");
  }
  scratch = static_cast<uint8_t *>(memory);
  if (cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) != cudaSuccess)
    throw ProgramError(setup + ": cudaEventCreateWithFlags failed");
}

void CudaHostUpdates::check(cudaError_t status, const char *call,
                            const Update &update) const {
  if (status != cudaSuccess)
    throw ProgramError(update.name + ": " + call +
                       " failed: " + cudaGetErrorName(status) + " (" +
                       cudaGetErrorString(status) + ")");
}

void CudaHostUpdates::enqueue(size_t index) {
  Update &update = *updates[index];
  cudaStream_t stream = updateStream;
  if (update.moment1Copy != Update::kNoCopy)
    update.moment1 = tiers.pinnedData(update.moment1Copy);
  if (update.moment2Copy != Update::kNoCopy)
    update.moment2 = tiers.pinnedData(update.moment2Copy);
  if (update.paramCopy != Update::kNoCopy)
    update.hostParam = tiers.pinnedData(update.paramCopy);
  uint64_t bytes = uint64_t(update.size) * sizeof(float);
  uint8_t *gradient = scratch, *param = scratch + partBytes(largest),
          *scalars = scratch + 2 * partBytes(largest);
  // After everything the compute stream did before: the gradient is final.
  check(cudaEventRecord(ready, compute), "cudaEventRecord", update);
  check(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent", update);
  check(cudaMemcpyAsync(gradient, update.gradient, bytes,
                        cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync", update);
  if (update.param)
    check(cudaMemcpyAsync(param, update.param, bytes, cudaMemcpyDeviceToHost,
                          stream),
          "cudaMemcpyAsync", update);
  check(cudaMemcpyAsync(scalars, update.step, sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync", update);
  check(cudaMemcpyAsync(scalars + sizeof(int32_t), update.lr, sizeof(float),
                        cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync", update);
  check(cudaLaunchHostFunc(stream, &CudaHostUpdates::run, &update),
        "cudaLaunchHostFunc", update);
  if (update.param)
    check(cudaMemcpyAsync(update.param, param, bytes, cudaMemcpyHostToDevice,
                          stream),
          "cudaMemcpyAsync", update);
  check(cudaEventRecord(update.finished, stream), "cudaEventRecord", update);
}

void CUDART_CB CudaHostUpdates::run(void *data) {
  Update &update = *static_cast<Update *>(data);
  CudaHostUpdates &owner = *update.owner;
  uint64_t part = partBytes(owner.largest);
  auto *gradient = reinterpret_cast<const float *>(owner.scratch);
  auto *param = update.hostParam
                    ? update.hostParam
                    : reinterpret_cast<float *>(owner.scratch + part);
  auto *step = reinterpret_cast<const int32_t *>(owner.scratch + 2 * part);
  auto *lr =
      reinterpret_cast<const float *>(owner.scratch + 2 * part + sizeof(int));
  cpu::AdamWConfig config{update.beta1, update.beta2, update.epsilon,
                          update.weightDecay};
  // No CUDA call may be made here, and nothing may be thrown through the
  // driver: the failure is kept for the end of the run.
  try {
    cpu::adamw(param, gradient, update.moment1, update.moment2, step, lr, param,
               update.moment1, update.moment2, update.size, config);
  } catch (const std::exception &failure) {
    std::lock_guard<std::mutex> lock(owner.errorMutex);
    if (owner.error.empty())
      owner.error = update.name + ": " + failure.what();
  }
}

void CudaHostUpdates::checkErrors() {
  std::string first;
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    first.swap(error);
  }
  if (!first.empty())
    throw ProgramError(first);
}

} // namespace partition::runtime::cudabackend
