//===- KernelArgs.cpp - shape checks of every kernel ----------------------===//

#include "runtime/program/KernelArgs.h"

#include <cmath>
#include <sstream>

namespace partition::runtime {
namespace {

std::string shapeString(const BufferInfo &buffer) {
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
          const std::string &where)
      : where(where), instruction(instruction),
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
  void checkFill();
  void checkCast();
  void checkAddI32();
  void checkFlatBucket();
  void checkSliceBlock();
  void checkVocabParallelEmbedding();
  void checkVocabParallelStatistic();
  void checkVocabParallelLoss();

  const std::string &where;
  const Instruction &instruction;
  const KernelInfo &info;
  KernelArgs args;
};

/// The heads, batch, head dimension and RoPE / window parameters of an
/// attention-like instruction from its ints and floats (the attention rows,
/// or with `scaled` the attention_scaled and ring attention rows) and its
/// query [B, T, H*D].
void Checker::attentionParameters(const BufferInfo &query, bool scaled) {
  args.heads = instruction.ints[0];
  args.kvHeads = instruction.ints[1];
  args.causal = instruction.ints[2] != 0;
  args.ropeTheta = instruction.floats[0];
  require(args.heads > 0 && args.kvHeads > 0 &&
              args.heads % args.kvHeads == 0,
          "heads " + std::to_string(args.heads) + " and kv heads " +
              std::to_string(args.kvHeads) + " are inconsistent");
  args.batch = query.shape[0];
  args.seq = query.shape[1];
  require(query.shape[2] % args.heads == 0,
          "query features are not divisible by the heads");
  args.headDim = query.shape[2] / args.heads;
  require(args.headDim > 0, "head dimension is zero");
  require(args.ropeTheta >= 0 && (args.ropeTheta == 0 || args.headDim % 2 == 0),
          "rotary embedding needs an even head dimension");
  if (scaled) {
    args.window = instruction.ints[3];
    require(args.window >= 0 && (args.window == 0 || args.causal),
            "sliding window " + std::to_string(args.window) +
                " must be 0 (none) or positive with causal attention");
    const std::vector<float> &f = instruction.floats;
    RopeScaling &s = args.ropeScaling;
    if (f[1] == float(RopeScalingKind::Linear))
      s.kind = RopeScalingKind::Linear;
    else if (f[1] == float(RopeScalingKind::Llama3))
      s.kind = RopeScalingKind::Llama3;
    else if (f[1] == float(RopeScalingKind::Yarn))
      s.kind = RopeScalingKind::Yarn;
    else
      require(f[1] == float(RopeScalingKind::None),
              "RoPE scaling kind " + std::to_string(f[1]) +
                  " is not 0 (none), 1 (linear), 2 (llama3) or 3 (yarn)");
    // Without scaling the factors are not read: the defaults stay, so
    // every unscaled table compares equal.
    if (s.kind == RopeScalingKind::Yarn) {
      s = RopeScaling::yarn(f[2], f[3], f[4], f[5]);
    } else if (s.kind != RopeScalingKind::None) {
      s.factor = f[2];
      s.lowFreqFactor = f[3];
      s.highFreqFactor = f[4];
      s.originalContext = f[5];
    }
    require(s.kind == RopeScalingKind::None || args.ropeTheta > 0,
            "RoPE scaling needs a positive theta");
    require(s.factor > 0 && std::isfinite(s.factor),
            "RoPE scaling factor must be positive");
    require(s.kind != RopeScalingKind::Llama3 ||
                (s.lowFreqFactor > 0 && s.highFreqFactor > s.lowFreqFactor &&
                 std::isfinite(s.highFreqFactor) && s.originalContext > 0 &&
                 std::isfinite(s.originalContext)),
            "llama3 RoPE scaling needs 0 < low < high frequency factors and "
            "a positive original context");
    // yarn divides by ln(theta) and takes ln(context / beta).
    require(s.kind != RopeScalingKind::Yarn ||
                (args.ropeTheta > 1 && s.betaSlow > 0 &&
                 s.betaFast > s.betaSlow && std::isfinite(s.betaFast) &&
                 s.originalContext > 0 && std::isfinite(s.originalContext)),
            "yarn RoPE scaling needs theta > 1, 0 < beta_slow < beta_fast "
            "and a positive original context");
  }
}

void Checker::attention() {
  bool isGrad = instruction.kernel == KernelId::AttentionGrad ||
                instruction.kernel == KernelId::AttentionScaledGrad ||
                instruction.kernel == KernelId::AttentionPositionsGrad;
  bool positioned = info.shape == KernelShape::AttentionPositions;
  bool scaled = instruction.kernel == KernelId::AttentionScaled ||
                instruction.kernel == KernelId::AttentionScaledGrad ||
                positioned;
  int q = isGrad ? 1 : 0;
  allFloat({0, 1, 2});
  if (isGrad)
    dtype(in(3), args.floatType, "value");
  const BufferInfo &query = in(q), &key = in(q + 1), &value = in(q + 2);
  rank(query, 3, "query");
  rank(key, 3, "key");
  attentionParameters(query, scaled);
  // With positions the keys may be longer than the queries (local queries
  // against all-gathered keys); without, they are the query's sequence.
  args.keySeq = positioned ? key.shape[1] : args.seq;
  if (positioned) {
    const BufferInfo &queryPositions = in(q + 3), &keyPositions = in(q + 4);
    dtype(queryPositions, DType::I32, "query positions");
    dtype(keyPositions, DType::I32, "key positions");
    vector(queryPositions, args.seq, "query positions");
    vector(keyPositions, args.keySeq, "key positions");
  }
  require(key.shape == std::vector<int64_t>{args.batch, args.keySeq,
                                            args.kvHeads * args.headDim} &&
              value.shape == key.shape,
          "key " + shapeString(key) + " / value " + shapeString(value) +
              " do not match query " + shapeString(query));
  if (isGrad) {
    require(in(0).shape == query.shape, "grad must be shaped like the query");
    require(out(0).shape == query.shape && out(1).shape == key.shape &&
                out(2).shape == key.shape,
            "gradients must be shaped like query, key and value");
  } else {
    require(out(0).shape == query.shape, "result must be shaped like the query");
  }
}

/// The ring attention kernels: attention_block (q, k, v, qpos, kpos -> out,
/// lse), attention_block_grad (dout, q, k, v, qpos, kpos, out, lse -> dq,
/// dk, dv) and attention_merge (out_a, lse_a, out_b, lse_b -> out, lse).
/// The keys are a block of their own length; positions are i32 and every
/// lse f32 [B, H, Tq] whatever the storage type.
void Checker::checkAttentionBlock() {
  const DType storage = args.floatType;
  if (instruction.kernel == KernelId::AttentionMerge) {
    const BufferInfo &outA = in(0), &lseA = in(1);
    rank(outA, 3, "out_a");
    rank(lseA, 3, "lse_a");
    for (int i : {0, 2})
      dtype(in(i), storage, "out_a and out_b");
    dtype(out(0), storage, "out");
    for (const BufferInfo *lse : {&in(1), &in(3), &out(1)})
      dtype(*lse, DType::F32, "every lse");
    args.batch = outA.shape[0];
    args.seq = outA.shape[1];
    args.heads = lseA.shape[1];
    require(args.heads > 0 && outA.shape[2] % args.heads == 0,
            "lse_a " + shapeString(lseA) + " has heads that do not divide " +
                "the features of out_a " + shapeString(outA));
    args.headDim = outA.shape[2] / args.heads;
    require(lseA.shape == std::vector<int64_t>{args.batch, args.heads,
                                               args.seq},
            "lse_a " + shapeString(lseA) + " must be [B, H, T] of out_a " +
                shapeString(outA));
    require(in(2).shape == outA.shape && out(0).shape == outA.shape,
            "out_b and out must be shaped like out_a " + shapeString(outA));
    require(in(3).shape == lseA.shape && out(1).shape == lseA.shape,
            "lse_b and lse must be shaped like lse_a " + shapeString(lseA));
    return;
  }
  const bool isGrad = instruction.kernel == KernelId::AttentionBlockGrad;
  const int q = isGrad ? 1 : 0;
  const BufferInfo &query = in(q), &key = in(q + 1), &value = in(q + 2),
                   &queryPositions = in(q + 3), &keyPositions = in(q + 4);
  for (int i = 0; i < 3 + q; ++i)
    dtype(in(i), storage, "query, key, value (and grad)");
  dtype(queryPositions, DType::I32, "query_positions");
  dtype(keyPositions, DType::I32, "key_positions");
  rank(query, 3, "query");
  rank(key, 3, "key");
  attentionParameters(query, /*scaled=*/true);
  args.keySeq = key.shape[1];
  require(key.shape == std::vector<int64_t>{args.batch, args.keySeq,
                                            args.kvHeads * args.headDim} &&
              value.shape == key.shape,
          "key " + shapeString(key) + " / value " + shapeString(value) +
              " do not match query " + shapeString(query) + " with " +
              std::to_string(args.kvHeads) + " kv heads");
  vector(queryPositions, args.seq, "query_positions");
  vector(keyPositions, args.keySeq, "key_positions");
  const std::vector<int64_t> lseShape = {args.batch, args.heads, args.seq};
  if (isGrad) {
    require(in(0).shape == query.shape && in(6).shape == query.shape,
            "grad and out must be shaped like the query " +
                shapeString(query));
    dtype(in(6), storage, "out");
    dtype(in(7), DType::F32, "lse");
    require(in(7).shape == lseShape,
            "lse " + shapeString(in(7)) + " must be [B, H, Tq] of the query " +
                shapeString(query));
    for (int o = 0; o < 3; ++o)
      dtype(out(o), storage, "every gradient");
    require(out(0).shape == query.shape && out(1).shape == key.shape &&
                out(2).shape == key.shape,
            "gradients must be shaped like query, key and value");
  } else {
    dtype(out(0), storage, "out");
    dtype(out(1), DType::F32, "lse");
    require(out(0).shape == query.shape,
            "out must be shaped like the query " + shapeString(query));
    require(out(1).shape == lseShape,
            "lse " + shapeString(out(1)) + " must be [B, H, Tq] of the query " +
                shapeString(query));
  }
}

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
  }
  // Outputs never overlap inputs, except exactly (in-place kernels).
  for (int o = 0; o < info.outputs; ++o)
    for (int i = 0; i < info.inputs; ++i) {
      const BufferInfo &a = out(o), &b = in(i);
      bool overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      bool exact = a.offset == b.offset && a.bytes == b.bytes;
      require(!overlap || (exact && info.inPlace),
              "an output overlaps an input");
    }
  return args;
}

} // namespace

KernelArgs checkInstruction(const Program &program,
                            const Instruction &instruction,
                            const std::string &where) {
  return Checker(program, instruction, where).run();
}

std::vector<std::vector<KernelArgs>> checkInstructions(const Program &program) {
  std::vector<std::vector<KernelArgs>> checked;
  for (const Function &function : program.functions) {
    checked.emplace_back();
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &instruction = function.instructions[i];
      if (!instruction.isKernel()) {
        checked.back().emplace_back();
        continue;
      }
      checked.back().push_back(checkInstruction(
          program, instruction,
          function.name + " instruction #" + std::to_string(i)));
    }
  }
  return checked;
}

} // namespace partition::runtime
