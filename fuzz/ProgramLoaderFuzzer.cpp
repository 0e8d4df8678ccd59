//===- ProgramLoaderFuzzer.cpp - the .ptp loader on arbitrary bytes -------===//
//
// A libFuzzer target: Program::parse, then checkInstruction on every kernel
// instruction of every function (collectives: their checked buffers and
// axes), then the lookups partition-run makes
// (single roles, modelInt) -- everything the runtime does with a file before
// it allocates the arena. Any input may be rejected with a ProgramError;
// any other exception, a crash, or a sanitizer report is a bug.
//
// Built with clang's -fsanitize=fuzzer,address,undefined when available
// (fuzz/CMakeLists.txt), and always with StandaloneFuzzDriver.cpp, a
// deterministic replay-and-mutate driver for compilers without libFuzzer.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/KernelArgs.h"
#include "runtime/program/Program.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

using namespace partition::runtime;

namespace {

[[noreturn]] void bug(const char *what, const std::string &message) {
  std::fprintf(stderr, "ProgramLoaderFuzzer: %s: %s\n", what,
               message.c_str());
  std::abort();
}

/// The checks of one stream (pipeline stage), selected in `program`.
void exerciseStream(const Program &program) {
  for (const Function &function : program.functions)
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      // A transfer moves one checked buffer to another stage of the
      // pipeline axis, never to its own.
      if (const auto &transfer = function.instructions[i].transfer) {
        const std::vector<uint32_t> &a = function.instructions[i].args;
        int pipeline = program.pipelineAxisIndex();
        if (a.size() != 1 || a[0] >= program.buffers.size())
          bug("transfer with an unchecked buffer", transfer->label);
        if (pipeline < 0 || transfer->axis != uint32_t(pipeline) ||
            transfer->peer < 0 ||
            transfer->peer >= program.mesh[pipeline].size ||
            transfer->peer == int64_t(program.stream))
          bug("transfer to an unchecked peer", transfer->label);
        continue;
      }
      // The loader checks collectives completely (mesh axes, f32 buffers
      // inside the arena, no overlaps); they have no shapes to check.
      if (const auto &collective = function.instructions[i].collective) {
        for (uint32_t arg : function.instructions[i].args)
          if (arg >= program.buffers.size() ||
              program.buffers[arg].dtype != DType::F32 ||
              program.buffers[arg].tier != Tier::Arena)
            bug("collective with an unchecked buffer", collective->label);
        int64_t group = 1;
        for (uint32_t axis : collective->axes) {
          if (axis >= program.mesh.size())
            bug("collective over an unknown axis", collective->label);
          group *= program.mesh[axis].size;
        }
        // The backend copies blocks of the input and output by their sizes.
        if (collective->kind != CollectiveKind::AllReduce) {
          const std::vector<uint32_t> &a = function.instructions[i].args;
          if (a.size() != 2)
            bug("block collective without input and output",
                collective->label);
          int64_t in = program.buffers[a[0]].elements,
                  out = program.buffers[a[1]].elements;
          bool gather = collective->kind == CollectiveKind::AllGather;
          if ((gather ? in * group != out : out * group != in) ||
              collective->dim >= program.buffers[a[0]].shape.size())
            bug("block collective with unchecked shapes", collective->label);
        }
        continue;
      }
      // A tier copy (the offload) moves one buffer of a tier into one of
      // the arena of the same size, or back: each inside its own space.
      if (const auto &copy = function.instructions[i].tierCopy) {
        const std::vector<uint32_t> &a = function.instructions[i].args;
        if (a.size() != 2 || a[0] >= program.buffers.size() ||
            a[1] >= program.buffers.size())
          bug("tier copy with an unchecked buffer", copy->label);
        const BufferInfo &tiered = program.buffers[a[copy->tierArg()]];
        const BufferInfo &staged = program.buffers[a[copy->arenaArg()]];
        uint64_t space =
            tiered.tier == Tier::Host ? program.hostBytes : program.nvmeBytes;
        if (tiered.tier == Tier::Arena || staged.tier != Tier::Arena ||
            tiered.bytes != staged.bytes ||
            tiered.offset + tiered.bytes > space ||
            staged.offset + staged.bytes > program.arenaBytes)
          bug("tier copy with unchecked buffers", copy->label);
        continue;
      }
      // A wait completes an earlier started collective or tier copy
      // (checked by the loader with the whole function); it names no
      // buffer.
      if (const auto &start = function.instructions[i].waitFor) {
        if (*start >= i || !function.instructions[*start].started())
          bug("wait for an unchecked collective", function.name);
        continue;
      }
      KernelArgs args =
          checkInstruction(program, function.instructions[i],
                           function.name + " instruction #" +
                               std::to_string(i));
      // The checked sizes index the arena: they must describe buffers that
      // lie inside it.
      for (const BufferInfo *buffer : args.buffers)
        if (buffer->tier != Tier::Arena ||
            buffer->offset + buffer->bytes > program.arenaBytes)
          bug("checked buffer outside the arena", buffer->name);
    }
  // The backend writes every axis index from its axes; the loader checked
  // them, so this must not throw.
  for (size_t index : program.withRole(Role::AxisIndex)) {
    try {
      (void)program.axisIndexAxes(program.buffers[index]);
    } catch (const ProgramError &error) {
      bug("unchecked axis index buffer", error.what());
    }
  }
}

void exercise(const uint8_t *data, size_t size) {
  Program program = Program::parse(data, size, "<fuzz>");
  // Every stream, as the rank of each pipeline stage selects it.
  for (size_t stream = 0; stream < program.streams.size(); ++stream) {
    program.selectStream(stream);
    exerciseStream(program);
  }
  program.selectStream(0);
  // What partition-run asks next; each may throw ProgramError.
  if (program.streams.size() == 1)
    for (Role role : {Role::Tokens, Role::Targets, Role::Loss})
      (void)program.single(role);
  (void)program.describeMesh();
  (void)program.devices();
  (void)program.modelInt("vocab");
  (void)program.modelInt("layers");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    exercise(data, size);
  } catch (const ProgramError &) {
    // A clean rejection.
  } catch (const std::exception &error) {
    bug("an exception other than ProgramError", error.what());
  } catch (...) {
    bug("a non-standard exception", "");
  }
  return 0;
}
