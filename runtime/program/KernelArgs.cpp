//===- KernelArgs.cpp - shape checks of every kernel ----------------------===//

#include "runtime/program/KernelArgs.h"
#include "runtime/program/ActionWalk.h"
#include "runtime/program/KernelArgsChecker.h"

#include <cmath>
#include <sstream>

namespace partition::runtime {
namespace kernelargs {


void Checker::checkEmbedding() {
  bool isGrad = instruction.kernel != KernelId::Embedding;
  if (instruction.kernel == KernelId::EmbeddingGradAdd) {
    dtype(in(2), args.floatType, "base");
    require(in(2).shape == out(0).shape,
            "base " + shapeString(in(2)) + " and result " +
                shapeString(out(0)) + " differ");
  }
  const BufferInfo &tokens = in(isGrad ? 1 : 0);
  const BufferInfo &table = isGrad ? out(0) : in(1);
  dtype(tokens, DType::I32, "tokens");
  dtype(table, args.floatType, "table");
  rank(table, 2, "table");
  args.vocab = table.shape[0];
  args.channels = table.shape[1];
  args.rows = tokens.elements;
  const BufferInfo &activation = isGrad ? in(0) : out(0);
  dtype(activation, args.floatType, "activation");
  require(activation.elements == args.rows * args.channels,
          "activation " + shapeString(activation) + " does not hold " +
              std::to_string(args.rows) + " rows of " +
              std::to_string(args.channels));
}

void Checker::checkPositionEmbedding() {
  bool isGrad = instruction.kernel == KernelId::PositionEmbeddingGrad;
  allFloat(isGrad ? std::initializer_list<int>{0}
                : std::initializer_list<int>{0, 1});
  const BufferInfo &x = in(0);
  const BufferInfo &table = isGrad ? out(0) : in(1);
  rank(x, 3, "activation");
  rank(table, 2, "table");
  args.batch = x.shape[0];
  args.seq = x.shape[1];
  args.channels = x.shape[2];
  args.positions = table.shape[0];
  require(table.shape[1] == args.channels && args.positions >= args.seq,
          "table " + shapeString(table) + " does not fit activation " +
              shapeString(x));
  if (!isGrad)
    sameElements(x, out(0), "result");
}

// position_embedding_at(_grad): the table's rows at explicit positions
// (their values, checked against P by the kernels, are data).
void Checker::checkPositionEmbeddingAt() {
  bool isGrad = instruction.kernel == KernelId::PositionEmbeddingAtGrad;
  allFloat(isGrad ? std::initializer_list<int>{0}
                  : std::initializer_list<int>{0, 1});
  const BufferInfo &x = in(0);
  const BufferInfo &table = isGrad ? out(0) : in(1);
  const BufferInfo &positions = in(isGrad ? 1 : 2);
  rank(x, 3, "activation");
  rank(table, 2, "table");
  args.batch = x.shape[0];
  args.seq = x.shape[1];
  args.channels = x.shape[2];
  args.positions = table.shape[0];
  require(table.shape[1] == args.channels && args.positions > 0,
          "table " + shapeString(table) + " does not fit activation " +
              shapeString(x));
  dtype(positions, DType::I32, "positions");
  vector(positions, args.seq, "positions");
  if (!isGrad)
    sameElements(x, out(0), "result");
}

// sequence_positions: an i32 vector of T cut into `chunks` chunks.
void Checker::checkSequencePositions() {
  const BufferInfo &positions = out(0);
  dtype(positions, DType::I32, "positions");
  rank(positions, 1, "positions");
  args.seq = positions.shape[0];
  args.chunks = instruction.ints[0];
  require(args.chunks == 1 ||
              (args.chunks >= 2 && args.chunks % 2 == 0 &&
               args.seq % args.chunks == 0),
          "chunks " + std::to_string(args.chunks) +
              " must be 1, or even and divide the length " +
              std::to_string(args.seq));
}

void Checker::checkNorm() {
  bool hasBeta = instruction.kernel == KernelId::LayerNorm;
  allFloat(hasBeta ? std::initializer_list<int>{0, 1, 2}
                 : std::initializer_list<int>{0, 1});
  rowsAndChannels(in(0));
  vector(in(1), args.channels, "gamma");
  if (hasBeta)
    vector(in(2), args.channels, "beta");
  sameElements(in(0), out(0), "result");
  require(instruction.floats[0] > 0, "epsilon must be positive");
}

void Checker::checkNormGrad() {
  allFloat({0, 1, 2});
  rowsAndChannels(in(1));
  sameElements(in(0), in(1), "grad");
  vector(in(2), args.channels, "gamma");
  sameElements(in(1), out(0), "input gradient");
  for (int o = 1; o < info.outputs; ++o)
    vector(out(o), args.channels, "parameter gradient");
  require(instruction.floats[0] > 0, "epsilon must be positive");
}

void Checker::checkLinear() {
  allFloat(instruction.kernel == KernelId::LinearBias
             ? std::initializer_list<int>{0, 1, 2}
             : std::initializer_list<int>{0, 1});
  rowsAndChannels(in(0));
  rank(in(1), 2, "weight");
  args.outFeatures = in(1).shape[0];
  args.inFeatures = in(1).shape[1];
  require(args.inFeatures == args.channels,
          "weight " + shapeString(in(1)) + " does not match input " +
              shapeString(in(0)));
  if (instruction.kernel == KernelId::LinearBias)
    vector(in(2), args.outFeatures, "bias");
  require(out(0).elements == args.rows * args.outFeatures,
          "result " + shapeString(out(0)) + " has the wrong size");
}

void Checker::checkLinearGradInput() {
  allFloat({0, 1});
  rowsAndChannels(in(0));
  rank(in(1), 2, "weight");
  args.outFeatures = in(1).shape[0];
  args.inFeatures = in(1).shape[1];
  require(args.outFeatures == args.channels,
          "weight " + shapeString(in(1)) + " does not match grad " +
              shapeString(in(0)));
  require(out(0).elements == args.rows * args.inFeatures,
          "input gradient " + shapeString(out(0)) + " has the wrong size");
}

void Checker::checkLinearGradWeight() {
  allFloat({0, 1});
  rowsAndChannels(in(0));
  args.outFeatures = args.channels;
  require(!in(1).shape.empty() && in(1).shape.back() > 0,
          "input has no feature dimension");
  args.inFeatures = in(1).shape.back();
  require(in(1).elements / args.inFeatures == args.rows,
          "grad " + shapeString(in(0)) + " and input " +
              shapeString(in(1)) + " have different rows");
  require(out(0).shape ==
              std::vector<int64_t>{args.outFeatures, args.inFeatures},
          "weight gradient " + shapeString(out(0)) + " has the wrong shape");
  if (instruction.kernel == KernelId::LinearGradWeightBias)
    vector(out(1), args.outFeatures, "bias gradient");
}

void Checker::checkElementwise() {
  std::initializer_list<int> none = {};
  allFloat(none);
  args.size = out(0).elements;
  for (int i = 0; i < info.inputs; ++i) {
    dtype(in(i), args.floatType, "every operand");
    sameElements(in(i), out(0), "operand");
  }
  for (int o = 1; o < info.outputs; ++o)
    sameElements(out(o), out(0), "output");
}

void Checker::checkCrossEntropy() {
  bool isGrad = instruction.kernel == KernelId::SoftmaxCrossEntropyGrad;
  int logitsIndex = isGrad ? 1 : 0;
  const BufferInfo &logits = in(logitsIndex);
  const BufferInfo &targets = in(logitsIndex + 1);
  dtype(logits, args.floatType, "logits");
  dtype(targets, DType::I32, "targets");
  rowsAndChannels(logits);
  args.vocab = args.channels;
  require(targets.elements == args.rows,
          "targets " + shapeString(targets) + " do not match logits " +
              shapeString(logits));
  if (isGrad) {
    dtype(in(0), DType::F32, "loss gradient");
    require(in(0).elements == 1, "loss gradient must be a scalar");
    sameElements(logits, out(0), "logits gradient");
  } else {
    dtype(out(0), DType::F32, "loss");
    require(out(0).elements == 1, "loss must be a scalar");
  }
}

void Checker::checkAdamW() {
  allFloat({0, 1, 2, 3, 5});
  dtype(in(4), DType::I32, "step");
  require(in(4).elements == 1 && in(5).elements == 1,
          "step and learning rate must be scalars");
  args.size = in(0).elements;
  for (int i : {1, 2, 3})
    sameElements(in(i), in(0), "gradient and moments");
  for (int o : {0, 1, 2})
    sameElements(out(o), in(0), "updated state");
}

void Checker::checkAdamWBlock() {
  allFloat({0, 2, 3, 4, 6});
  dtype(in(1), DType::I32, "block");
  dtype(in(5), DType::I32, "step");
  require(in(1).elements == 1 && in(1).shape.empty(),
          "block " + shapeString(in(1)) + " must be a scalar");
  require(in(5).elements == 1 && in(6).elements == 1,
          "step and learning rate must be scalars");
  args.blocks = instruction.ints[0];
  args.size = in(2).elements;
  // Divided, not multiplied: `blocks` comes from the program unchecked.
  require(args.blocks > 0 && in(0).elements % args.blocks == 0 &&
              in(0).elements / args.blocks == args.size,
          "parameter " + shapeString(in(0)) + " must be " +
              std::to_string(args.blocks) + " blocks of the gradient's " +
              std::to_string(args.size) + " elements");
  for (int i : {3, 4})
    sameElements(in(i), in(2), "moments");
  for (int o : {0, 1, 2})
    sameElements(out(o), in(2), "updated state");
}

void Checker::checkFill() {
  args.size = out(0).elements;
}

void Checker::checkCast() {
  require(isFloat(in(0).dtype) && isFloat(out(0).dtype),
          std::string("cast converts between f32 and bf16, not ") +
              dtypeName(in(0).dtype) + " to " + dtypeName(out(0).dtype));
  sameElements(in(0), out(0), "result");
  args.size = out(0).elements;
}

void Checker::checkAddI32() {
  for (int i : {0, 1})
    dtype(in(i), DType::I32, "operand");
  dtype(out(0), DType::I32, "result");
  sameElements(in(0), out(0), "operand");
  sameElements(in(1), out(0), "operand");
  args.size = out(0).elements;
}

void Checker::checkFlatBucket() {
  bool pack = instruction.kernel == KernelId::FlatPack;
  const BufferInfo &bucket = pack ? out(0) : in(0);
  const BufferInfo &tensor = pack ? in(0) : out(0);
  require(isFloat(bucket.dtype) && tensor.dtype == bucket.dtype,
          "the tensor and the bucket must hold one float type");
  require(bucket.shape.size() == 2 && bucket.shape[0] > 0,
          "bucket " + shapeString(bucket) + " must be [rows, columns]");
  args.rows = bucket.shape[0];
  args.channels = bucket.shape[1];
  args.size = tensor.elements;
  int64_t offset = instruction.ints[0];
  args.blockDim = (tensor.elements + args.rows - 1) / args.rows;
  require(offset >= 0 && args.blockDim <= args.channels - offset,
          "columns [" + std::to_string(offset) + ", +" +
              std::to_string(args.blockDim) + ") of a tensor of " +
              std::to_string(tensor.elements) +
              " elements are not inside bucket " + shapeString(bucket));
  args.inner = offset;
}

void Checker::checkSliceBlock() {
  // Moves elements of any type: floats or token ids.
  dtype(in(1), DType::I32, "index");
  dtype(out(0), in(0).dtype, "result");
  require(in(1).elements == 1 && in(1).shape.empty(),
          "index " + shapeString(in(1)) + " must be a scalar");
  int64_t dim = instruction.ints[0];
  args.blocks = instruction.ints[1];
  const std::vector<int64_t> &shape = in(0).shape;
  require(dim >= 0 && dim < int64_t(shape.size()),
          "dim " + std::to_string(dim) + " is not a dimension of " +
              shapeString(in(0)));
  require(args.blocks > 0 && shape[dim] % args.blocks == 0,
          "dimension " + std::to_string(dim) + " of " + shapeString(in(0)) +
              " does not split into " + std::to_string(args.blocks) +
              " blocks");
  std::vector<int64_t> expected = shape;
  expected[dim] /= args.blocks;
  require(out(0).shape == expected,
          "result " + shapeString(out(0)) + " must be one block of " +
              shapeString(in(0)));
  args.outer = 1;
  for (int64_t d = 0; d < dim; ++d)
    args.outer *= shape[d];
  args.blockDim = expected[dim];
  args.size = out(0).elements;
  args.inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d)
    args.inner *= shape[d];
}

void Checker::checkVocabParallelEmbedding() {
  bool isGrad = instruction.kernel == KernelId::VocabParallelEmbeddingGrad;
  const BufferInfo &tokens = in(isGrad ? 1 : 0);
  const BufferInfo &table = isGrad ? out(0) : in(1);
  const BufferInfo &activation = isGrad ? in(0) : out(0);
  dtype(tokens, DType::I32, "tokens");
  dtype(in(2), DType::I32, "shard");
  require(in(2).elements == 1,
          "shard " + shapeString(in(2)) + " must be a scalar");
  dtype(table, args.floatType, "table");
  rank(table, 2, "table");
  dtype(activation, args.floatType, "activation");
  args.vocab = table.shape[0];
  args.channels = table.shape[1];
  args.rows = tokens.elements;
  require(activation.elements == args.rows * args.channels,
          "activation " + shapeString(activation) + " does not hold " +
              std::to_string(args.rows) + " rows of " +
              std::to_string(args.channels));
}

void Checker::checkVocabParallelStatistic() {
  // Local logits [rows, Vl]; every statistic holds one f32 per row.
  bool isGrad =
      instruction.kernel == KernelId::VocabParallelCrossEntropyGrad ||
      instruction.kernel == KernelId::VocabParallelMaskedCrossEntropyGrad;
  bool masked =
      instruction.kernel == KernelId::VocabParallelMaskedMax ||
      instruction.kernel == KernelId::VocabParallelMaskedSumExp ||
      instruction.kernel == KernelId::VocabParallelMaskedCrossEntropyGrad;
  if (masked) {
    // Global ids are i32 tokens: the logical vocabulary is 1..2^31.
    args.logicalVocab = instruction.ints[0];
    require(args.logicalVocab >= 1 &&
                args.logicalVocab <= int64_t(INT32_MAX) + 1,
            "the logical vocabulary " + std::to_string(args.logicalVocab) +
                " is not in [1, 2^31]");
  }
  const BufferInfo &logits = in(isGrad ? 1 : 0);
  dtype(logits, args.floatType, "logits");
  rowsAndChannels(logits);
  args.vocab = args.channels;
  auto perRow = [&](const BufferInfo &buffer, const std::string &what) {
    dtype(buffer, DType::F32, what.c_str());
    require(buffer.elements == args.rows,
            what + " " + shapeString(buffer) + " does not hold one value "
                "per row of logits " + shapeString(logits));
  };
  auto targetsAndShard = [&](int targets, int shard) {
    dtype(in(targets), DType::I32, "targets");
    require(in(targets).elements == args.rows,
            "targets " + shapeString(in(targets)) +
                " do not match logits " + shapeString(logits));
    dtype(in(shard), DType::I32, "shard");
    require(in(shard).elements == 1,
            "shard " + shapeString(in(shard)) + " must be a scalar");
  };
  auto shardAt = [&](int shard) {
    dtype(in(shard), DType::I32, "shard");
    require(in(shard).elements == 1,
            "shard " + shapeString(in(shard)) + " must be a scalar");
  };
  if (instruction.kernel == KernelId::VocabParallelMax ||
      instruction.kernel == KernelId::VocabParallelMaskedMax) {
    if (masked)
      shardAt(1);
    perRow(out(0), "max");
  } else if (instruction.kernel == KernelId::VocabParallelTargetLogit) {
    targetsAndShard(1, 2);
    perRow(out(0), "target logit");
  } else if (instruction.kernel == KernelId::VocabParallelSumExp ||
             instruction.kernel == KernelId::VocabParallelMaskedSumExp) {
    if (masked)
      shardAt(2);
    perRow(in(1), "max");
    perRow(out(0), "sum_exp");
  } else {
    dtype(in(0), DType::F32, "loss gradient");
    require(in(0).elements == 1, "loss gradient must be a scalar");
    targetsAndShard(2, 3);
    perRow(in(4), "max");
    perRow(in(5), "sum_exp");
    dtype(out(0), args.floatType, "logits gradient");
    sameElements(logits, out(0), "logits gradient");
  }
}

void Checker::checkVocabParallelLoss() {
  allFloat({0, 1, 2});
  args.rows = in(0).elements;
  sameElements(in(1), in(0), "sum_exp and max");
  sameElements(in(2), in(0), "target logit and max");
  require(out(0).elements == 1, "loss must be a scalar");
}

KernelArgs Checker::run() {
  args.floatType = storageType();
  switch (info.shape) {
  case KernelShape::Embedding:
    checkEmbedding();
    break;
  case KernelShape::PositionEmbedding:
    checkPositionEmbedding();
    break;
  case KernelShape::PositionEmbeddingAt:
    checkPositionEmbeddingAt();
    break;
  case KernelShape::SequencePositions:
    checkSequencePositions();
    break;
  case KernelShape::AttentionPositions:
    attention();
    break;
  case KernelShape::Norm:
    checkNorm();
    break;
  case KernelShape::NormGrad:
    checkNormGrad();
    break;
  case KernelShape::Linear:
    checkLinear();
    break;
  case KernelShape::LinearGradInput:
    checkLinearGradInput();
    break;
  case KernelShape::LinearGradWeight:
    checkLinearGradWeight();
    break;
  case KernelShape::Elementwise:
    checkElementwise();
    break;
  case KernelShape::Attention:
    attention();
    break;
  case KernelShape::CrossEntropy:
    checkCrossEntropy();
    break;
  case KernelShape::AdamW:
    checkAdamW();
    break;
  case KernelShape::Fill:
    checkFill();
    break;
  case KernelShape::Cast:
    checkCast();
    break;
  case KernelShape::AddI32:
    checkAddI32();
    break;
  case KernelShape::FlatBucket:
    checkFlatBucket();
    break;
  case KernelShape::SliceBlock:
    checkSliceBlock();
    break;
  case KernelShape::VocabParallelEmbedding:
    checkVocabParallelEmbedding();
    break;
  case KernelShape::VocabParallelStatistic:
    checkVocabParallelStatistic();
    break;
  case KernelShape::VocabParallelLoss:
    checkVocabParallelLoss();
    break;
  case KernelShape::AttentionBlock:
    checkAttentionBlock();
    break;
  case KernelShape::MoeRoute:
    checkMoeRoute();
    break;
  case KernelShape::MoeDispatch:
    checkMoeDispatch();
    break;
  case KernelShape::ExpertLinear:
    checkExpertLinear();
    break;
  case KernelShape::MoeAuxLoss:
    checkMoeAuxLoss();
    break;
  case KernelShape::MoeBias:
    checkMoeBias();
    break;
  case KernelShape::AdamWBlock:
    checkAdamWBlock();
    break;
  }
  // Outputs never overlap inputs, except exactly (in-place kernels), in
  // an instruction that runs.
  for (int o = 0; o < info.outputs && runs; ++o)
    for (int i = 0; i < info.inputs; ++i) {
      const BufferInfo &a = out(o), &b = in(i);
      bool overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      bool exact = a.offset == b.offset && a.bytes == b.bytes;
      require(!overlap || (exact && info.inPlace),
              "an output overlaps an input");
    }
  return args;
}

} // namespace kernelargs

KernelArgs checkInstruction(const Program &program,
                            const Instruction &instruction,
                            const std::string &where, bool runs) {
  return kernelargs::Checker(program, instruction, where, runs).run();
}

std::vector<std::vector<KernelArgs>> checkInstructions(const Program &program) {
  std::vector<std::vector<KernelArgs>> checked;
  for (const Function &function : program.functions) {
    checked.emplace_back();
    std::vector<int64_t> runs = instructionRuns(function);
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &instruction = function.instructions[i];
      if (!instruction.isKernel()) {
        checked.back().emplace_back();
        continue;
      }
      // A walk's region code that no action runs (GPipe's shared
      // backward in slot 0, whose first backward has a region of its own)
      // may name buffers whose bytes the region's temporaries take.
      checked.back().push_back(checkInstruction(
          program, instruction,
          function.name + " instruction #" + std::to_string(i),
          runs[i] > 0));
    }
  }
  return checked;
}

} // namespace partition::runtime
