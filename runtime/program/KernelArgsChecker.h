//===- KernelArgsChecker.h - the checks of one kernel call -----*- C++ -*-===//
//
// Internal to KernelArgs.cpp, KernelArgsAttention.cpp (the attention
// rows' checks, the longest family) and KernelArgsMoe.cpp: the Checker that validates one kernel
// instruction's buffers and parameters against its row of Kernels.def and
// fills in the dimensions its body uses.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROGRAM_KERNELARGSCHECKER_H
#define PARTITION_RUNTIME_PROGRAM_KERNELARGSCHECKER_H

#include "runtime/program/KernelArgs.h"

#include <sstream>
#include <string>

namespace partition::runtime::kernelargs {

inline std::string shapeString(const BufferInfo &buffer) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < buffer.shape.size(); ++i)
    os << (i ? "," : "") << buffer.shape[i];
  os << "]";
  return os.str();
}

class Checker {
public:
  Checker(const Program &program, const Instruction &instruction,
          const std::string &where, bool runs = true)
      : where(where), instruction(instruction), runs(runs),
        info(*lookupKernel(static_cast<uint32_t>(instruction.kernel))) {
    args.kernel = instruction.kernel;
    for (uint32_t arg : instruction.args)
      args.buffers.push_back(&program.buffers[arg]);
  }

  KernelArgs run();

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw ProgramError(where + " (" + std::string(info.name) + "): " + what);
  }
  const BufferInfo &in(int i) const { return *args.buffers[i]; }
  const BufferInfo &out(int i) const {
    return *args.buffers[info.inputs + i];
  }
  void require(bool condition, const std::string &what) const {
    if (!condition)
      fail(what);
  }
  void dtype(const BufferInfo &buffer, DType expected,
             const char *what) const {
    require(buffer.dtype == expected,
            std::string(what) + " must hold " + dtypeName(expected) +
                ", not " + dtypeName(buffer.dtype));
  }
  /// The listed inputs and every output hold the instruction's storage type.
  void allFloat(std::initializer_list<int> inputs) const {
    for (int i : inputs)
      dtype(in(i), args.floatType, "every float operand");
    for (int o = 0; o < info.outputs; ++o)
      dtype(out(o), args.floatType, "every output");
  }
  /// The storage type (the kernel's Storage column): that of the first
  /// float buffer unless the row says otherwise.
  DType storageType() const {
    switch (info.storage) {
    case KernelStorage::F32:
      return DType::F32;
    case KernelStorage::Input1:
      return in(1).dtype;
    case KernelStorage::FirstFloat:
      break;
    }
    for (const BufferInfo *buffer : args.buffers)
      if (isFloat(buffer->dtype))
        return buffer->dtype;
    return DType::F32;
  }
  void rank(const BufferInfo &buffer, size_t expected,
            const char *what) const {
    require(buffer.shape.size() == expected,
            std::string(what) + " " + shapeString(buffer) + " must have rank " +
                std::to_string(expected));
  }
  void sameElements(const BufferInfo &a, const BufferInfo &b,
                    const char *what) const {
    require(a.elements == b.elements,
            std::string(what) + ": " + shapeString(a) + " and " +
                shapeString(b) + " differ in size");
  }
  /// [..., C]: rows and channels of an activation.
  void rowsAndChannels(const BufferInfo &buffer) {
    require(!buffer.shape.empty() && buffer.shape.back() > 0,
            "activation " + shapeString(buffer) + " has no feature dimension");
    args.channels = buffer.shape.back();
    args.rows = buffer.elements / args.channels;
  }
  void vector(const BufferInfo &buffer, int64_t length, const char *what) {
    require(buffer.shape.size() == 1 && buffer.shape[0] == length,
            std::string(what) + " " + shapeString(buffer) + " must be [" +
                std::to_string(length) + "]");
  }
  /// One check per KernelShape family (the row's Shape column): types,
  /// ranks and sizes, and the dimensions the bodies use into `args`.
  void attentionParameters(const BufferInfo &query, bool scaled);
  void attention();
  void checkAttentionBlock();
  void checkEmbedding();
  void checkPositionEmbedding();
  void checkPositionEmbeddingAt();
  void checkSequencePositions();
  void checkNorm();
  void checkNormGrad();
  void checkLinear();
  void checkLinearGradInput();
  void checkLinearGradWeight();
  void checkElementwise();
  void checkCrossEntropy();
  void checkAdamW();
  void checkAdamWBlock();
  void checkFill();
  void checkCast();
  void checkAddI32();
  void checkFlatBucket();
  void checkSliceBlock();
  void checkVocabParallelEmbedding();
  void checkVocabParallelStatistic();
  void checkVocabParallelLoss();
  // Mixture of experts (KernelArgsMoe.cpp).
  void moeChoices(const BufferInfo &buffer, const char *what, DType type);
  void moeScoring(int64_t code);
  void checkMoeRoute();
  void checkMoeDispatch();
  void checkExpertLinear();
  void checkMoeAuxLoss();
  void checkMoeBias();

  const std::string &where;
  const Instruction &instruction;
  /// Whether a step runs it (its outputs may overlap its inputs if not).
  bool runs;
  const KernelInfo &info;
  KernelArgs args;
};

} // namespace partition::runtime::kernelargs

#endif // PARTITION_RUNTIME_PROGRAM_KERNELARGSCHECKER_H
