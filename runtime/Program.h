//===- Program.h - a loaded and validated .ptp program ----------*- C++ -*-===//
//
// Everything in a program file is checked before anything runs: the
// FlatBuffer itself, the schema version, every buffer against the arena,
// every instruction against the kernel table. The backends then check each
// instruction's shapes when they compile it, so no file can make the
// runtime read or write outside the arena.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROGRAM_H
#define PARTITION_RUNTIME_PROGRAM_H

#include "runtime/KernelTable.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace partition::runtime {

/// A program that cannot be loaded or run; the message is one line.
class ProgramError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t { F32, I32 };

/// Mirrors ptp::Role (runtime/program/Program.fbs).
enum class Role : uint8_t {
  Temporary,
  Param,
  Moment1,
  Moment2,
  Step,
  LearningRate,
  Tokens,
  Targets,
  Loss,
  Gradient,
};

const char *roleName(Role role);

struct BufferInfo {
  Role role = Role::Temporary;
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
};

struct Instruction {
  KernelId kernel;
  std::vector<uint32_t> args; // inputs, then outputs
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

/// An entry point of the program: "train_step" or "eval_step".
struct Function {
  std::string name;
  std::vector<Instruction> instructions;
};

class Program {
public:
  /// Reads and validates `path`; throws ProgramError.
  static Program load(const std::string &path);
  /// Validates a program held in memory; `origin` names it in errors.
  static Program parse(const uint8_t *data, size_t size,
                       const std::string &origin);

  uint64_t arenaBytes = 0;
  std::vector<BufferInfo> buffers;
  std::vector<Function> functions;
  /// The model configuration (arch, layers, hidden, vocab, seq_len, batch...).
  nlohmann::json model;
  /// The step's hyper-parameters (microbatches, beta1, ...).
  nlohmann::json train;

  /// The one buffer with `role`; throws when there is none or several.
  const BufferInfo &single(Role role) const;
  /// Indices of the buffers with `role`, in program order.
  std::vector<size_t> withRole(Role role) const;
  /// The function called `name`, or null.
  const Function *function(const std::string &name) const;
  /// An integer field of the model configuration; throws when absent.
  int64_t modelInt(const char *field) const;
};

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_PROGRAM_H
