//===- BlasCore.h - OpenBLAS kernels chosen for this CPU --------*- C++ -*-===//
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels ("core") once,
// when the library is loaded, from the CPU's family and model, and can get it
// wrong: Debian 12's 0.3.21 runs SSE3 `Prescott` kernels on a Xeon with
// AVX-512, AVX512-BF16 and AMX, a training step 4.5x slower than with
// `Cooperlake`. The only way to choose is the environment variable
// OPENBLAS_CORETYPE, read by the library's load-time constructor.
//
// ensureBestBlasCore() is what every tool that runs GEMMs calls first in
// main(): it compares the CPU's features (cpuid, and the vector state the OS
// enables) with openblas_get_corename(), and when the library chose weaker
// kernels than the CPU runs it restarts the process once with
// OPENBLAS_CORETYPE set. A user's OPENBLAS_CORETYPE is never overridden.
// blasCoreReport() then says which kernels run and why, for partition-run's
// first line and metrics summary and for the benchmarks.
//
// chooseBlasCore() is the decision alone, a pure function, for the tests.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_CPU_BLASCORE_H
#define PARTITION_RUNTIME_BACKEND_CPU_BLASCORE_H

#include <string>
#include <string_view>

namespace partition::runtime::cpu {

/// The x86 features that decide which OpenBLAS kernels can run: each true
/// only when the CPU has it (cpuid) and the OS saves its registers (xgetbv).
struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512bf16 = false;
  bool amx = false; // AMX-TILE and AMX-BF16 (reported; no 0.3.21 kernel uses it)
  bool avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  /// "avx2 fma avx512f ..." (the ones present), for messages.
  std::string describe() const;
};

/// This CPU's features (all false off x86-64).
CpuFeatures detectCpuFeatures();

/// How good an OpenBLAS x86-64 core's kernels are: 1 SSE, 2 AVX, 3 AVX2/FMA,
/// 4 AVX-512, 5 AVX-512 + AVX512-BF16, 6 beyond (AMX, newer libraries); 0 for
/// a name this table does not know (then left alone). Case-insensitive.
int blasCoreLevel(std::string_view core);

/// The best core OpenBLAS 0.3.21 has for these features: "Cooperlake"
/// (AVX-512 F/BW/VL/DQ + BF16), "SkylakeX" (AVX-512 F/BW/VL/DQ), "Haswell"
/// (AVX2 + FMA), or "" (nothing better than what any x86-64 library picks).
std::string bestBlasCoreFor(const CpuFeatures &features);

/// Where the kernels that run came from.
enum class BlasCoreSource {
  Library,     // the library's own choice, kept: as good as the CPU allows
  Corrected,   // ensureBestBlasCore restarted the process with a better one
  Environment, // the user's OPENBLAS_CORETYPE, respected as given
};

/// "library", "corrected", "OPENBLAS_CORETYPE" (the metrics summary's).
const char *blasCoreSourceName(BlasCoreSource source);

struct BlasCoreReport {
  std::string core;        // openblas_get_corename(): the kernels that run
  BlasCoreSource source = BlasCoreSource::Library;
  std::string libraryCore; // Corrected: the library's own, weaker choice
  std::string requested;   // Corrected / Environment: OPENBLAS_CORETYPE
  std::string cpuBest;     // bestBlasCoreFor(this CPU)
  std::string features;    // CpuFeatures::describe()
  /// One phrase: "OpenBLAS kernels Cooperlake (corrected from Prescott)".
  std::string describe() const;
};

/// What chooseBlasCore decided: restart with OPENBLAS_CORETYPE=reexecWith
/// (when not empty), else run on as `report` says.
struct BlasCoreChoice {
  std::string reexecWith;
  BlasCoreReport report;
};

/// The decision. `libraryCore` is the core the loaded library runs;
/// `coretypeEnv` OPENBLAS_CORETYPE (null when unset); `markerEnv` the marker
/// a restart leaves ("Requested:LibraryCore", null when unset), which tells
/// our own OPENBLAS_CORETYPE from a user's. Restarts only when
/// OPENBLAS_CORETYPE is unset and the library's core is known and weaker than
/// bestBlasCoreFor(features), so a restarted process never restarts again.
BlasCoreChoice chooseBlasCore(const CpuFeatures &features,
                              std::string_view libraryCore,
                              const char *coretypeEnv, const char *markerEnv);

/// The environment variable the restart sets besides OPENBLAS_CORETYPE.
inline constexpr const char *kBlasCoreMarkerEnv = "PARTITION_BLAS_CORE_RESTART";
/// Tests only: decide as if the library had chosen this core (e.g. Prescott),
/// to exercise the restart on any machine.
inline constexpr const char *kBlasCorePretendEnv =
    "PARTITION_TEST_BLAS_LIBRARY_CORE";

/// Call first in main(), before anything is printed, written or started
/// (MPI, threads): may replace the process (execv of /proc/self/exe, same
/// pid and arguments) once. Later calls do nothing.
void ensureBestBlasCore(char **argv);

/// Which kernels this process runs, and why (decided at the first call if
/// ensureBestBlasCore was not called: then never a restart).
const BlasCoreReport &blasCoreReport();

} // namespace partition::runtime::cpu

#endif // PARTITION_RUNTIME_BACKEND_CPU_BLASCORE_H
