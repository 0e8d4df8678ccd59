//===- SafetensorsFuzzer.cpp - the checkpoint reader on arbitrary bytes ---===//
//
// A libFuzzer target over what partition-run --resume does with a
// checkpoint file before it touches the backend: Safetensors::open (header
// length, JSON, dtypes, shapes, offsets), reading every tensor, then
// openCheckpointFile (version, state, the checksum keys), checkSameModel,
// checkSameTensors and Checkpoint::read of every tensor (CRC-32C, finite
// values). No MPI, no program: the expectations are the file's own, plus
// the model of the seeds.
//
// The bytes are a memfd opened by its /proc/self/fd path, so the reader's
// own open/fstat/pread code runs, without a disk. Any input may be rejected
// with a CheckpointError; any other exception, a crash, a sanitizer report,
// or a property below failing is a bug. Memory is bounded by the input: a
// header or tensor length beyond the file must be refused before it is
// allocated (run_safetensors_fuzz.py sets -malloc_limit_mb).
//
// Built like ProgramLoaderFuzzer.cpp: with clang's
// -fsanitize=fuzzer,address,undefined when available, and always with
// StandaloneFuzzDriver.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Crc32c.h"
#include "runtime/checkpoint/Safetensors.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace partition::runtime::checkpoint;

namespace {

[[noreturn]] void bug(const char *what, const std::string &message) {
  std::fprintf(stderr, "SafetensorsFuzzer: %s: %s\n", what, message.c_str());
  std::abort();
}

/// One memfd for the whole session, rewritten per input.
const std::string &inputPath(const uint8_t *data, size_t size) {
  static int fd = -1;
  static std::string path;
  if (fd < 0) {
    fd = ::memfd_create("safetensors-fuzz", MFD_CLOEXEC);
    if (fd < 0)
      bug("memfd_create failed", "");
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  if (::ftruncate(fd, 0) != 0)
    bug("ftruncate failed", path);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, data + done, size - done, off_t(done));
    if (n <= 0)
      bug("pwrite failed", path);
    done += size_t(n);
  }
  return path;
}

/// The file as a safetensors file: every tensor read whole and by slices.
void exerciseSafetensors(const std::string &path, size_t size) {
  Safetensors file = Safetensors::open(path);
  uint64_t total = 0;
  for (const std::string &name : file.names()) {
    const TensorInfo &info = file.info(name);
    // open() checked that the tensors tile the data section inside the
    // file: so much may be allocated.
    total += info.bytes();
    if (info.bytes() > size || total > size)
      bug("tensor bytes beyond the file were accepted", name);
    std::vector<unsigned char> bytes(info.bytes());
    file.read(name, info.dtype, info.shape, bytes.data(), bytes.size());
    if (info.bytes() >= 2) {
      unsigned char half[1];
      file.readBytes(name, info.bytes() / 2, half, 1);
      if (half[0] != bytes[info.bytes() / 2])
        bug("readBytes disagrees with read", name);
    }
    // The element count agrees with the byte count open() checked.
    if (uint64_t(info.elements()) * dtypeSize(info.dtype) != info.bytes())
      bug("elements() disagrees with the checked byte count", name);
  }
}

/// The file as partition-run's --resume sees it.
void exerciseCheckpoint(const std::string &path) {
  Checkpoint checkpoint = openCheckpointFile(path);
  std::vector<ExpectedTensor> own;
  for (const std::string &name : checkpoint.tensors.names()) {
    const TensorInfo &info = checkpoint.tensors.info(name);
    own.push_back({name, info.dtype, info.shape});
  }
  // The file's own tensors always match it.
  try {
    checkSameTensors(checkpoint, own);
  } catch (const CheckpointError &error) {
    bug("checkSameTensors rejects the file's own tensors", error.what());
  }
  for (const ExpectedTensor &tensor : own) {
    std::vector<unsigned char> bytes(checkpoint.tensors.info(tensor.name)
                                         .bytes());
    checkpoint.read(tensor.name, tensor.dtype, tensor.shape, bytes.data(),
                    bytes.size());
    // What read() accepted has the stored checksum.
    if (checkpoint.checksummed()) {
      char hex[9];
      std::snprintf(hex, sizeof(hex), "%08x",
                    crc32c(bytes.data(), bytes.size()));
      if (checkpoint.tensors.metadata(checksumKey(tensor.name)) != hex)
        bug("read() accepted a tensor whose checksum differs", tensor.name);
    }
  }
  // The model of the seeds (run_safetensors_fuzz.py's gpt2), so that
  // inputs get past the comparison of configurations to that of tensors.
  checkSameModel(checkpoint,
                 R"({"arch":"gpt2","batch":2,"ffn":16,"heads":2,"hidden":8,)"
                 R"("kv_heads":2,"layers":1,"positions":4,"seq_len":4,)"
                 R"("tied_embedding":true,"vocab":16})");
  checkSameTensors(checkpoint, {{"wte", DType::F32, {16, 8}}});
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = inputPath(data, size);
  for (auto exercise :
       {+[](const std::string &p, size_t n) { exerciseSafetensors(p, n); },
        +[](const std::string &p, size_t) { exerciseCheckpoint(p); }}) {
    try {
      exercise(path, size);
    } catch (const CheckpointError &error) {
      // A clean rejection: one line.
      if (std::string(error.what()).find('\n') != std::string::npos)
        bug("a CheckpointError of several lines", error.what());
    } catch (const std::exception &error) {
      bug("an exception other than CheckpointError", error.what());
    } catch (...) {
      bug("a non-standard exception", "");
    }
  }
  return 0;
}
