//===- BlasCore.cpp - OpenBLAS kernels chosen for this CPU ----------------===//
//
// Why a restart. OpenBLAS reads OPENBLAS_CORETYPE in its load-time
// constructor (gotoblas_init -> gotoblas_dynamic_init) and exports no call to
// change the core afterwards, so the variable must be set before the library
// is loaded. Two ways: load OpenBLAS late (dlopen after setting the variable),
// which means every cblas_* call of the kernels, the tools and the tests goes
// through function pointers and the build stops linking it normally; or
// execv the same binary once with the variable set. The restart is a few
// milliseconds, happens only on a machine where the library chose badly,
// touches no kernel code, and keeps the pid, so under mpirun or srun each rank
// replaces itself in place (before MPI_Init) and the launcher sees nothing.
// A marker variable (kBlasCoreMarkerEnv) tells our OPENBLAS_CORETYPE from a
// user's, and a process started with OPENBLAS_CORETYPE set never restarts, so
// there is no loop. Child processes (partition-run --nproc's mpirun ranks)
// inherit both and start directly with the right kernels.
//
// The names. OpenBLAS 0.3.21's dynamic.c accepts, as OPENBLAS_CORETYPE, the
// names of its table up to "SkylakeX" ("Haswell", "Zen", "SkylakeX", ...) but
// not "Cooperlake" (its search stops one entry short; fixed in 0.3.22): it
// then falls back to choosing by features, AVX512-BF16 -> Cooperlake,
// AVX-512 -> SkylakeX, AVX2 -> Haswell, which is what we ask for. So setting
// "Cooperlake" yields Cooperlake on both versions where the CPU has
// AVX512-BF16 (the only case we set it), and the report shows what the
// library really runs (openblas_get_corename after the restart).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/BlasCore.h"

#include <cblas.h>

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace partition::runtime::cpu {
namespace {

bool equalNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

#if defined(__x86_64__) || defined(__i386__)
uint64_t readXcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}
#endif

} // namespace

std::string CpuFeatures::describe() const {
  std::string text;
  auto add = [&](bool present, const char *name) {
    if (!present)
      return;
    if (!text.empty())
      text += ' ';
    text += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512bf16, "avx512_bf16");
  add(amx, "amx");
  return text.empty() ? "none of avx2/avx512/amx" : text;
}

CpuFeatures detectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return f;
  bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12);
  if (!osxsave || !avx)
    return f;
  uint64_t xcr0 = readXcr0();
  bool ymm = (xcr0 & 0x6) == 0x6;       // SSE and AVX state
  bool zmm = (xcr0 & 0xe6) == 0xe6;     // + opmask, ZMM0-15 upper, ZMM16-31
  bool tiles = (xcr0 & 0x60000) == 0x60000; // XTILECFG, XTILEDATA
  if (!ymm)
    return f;
  unsigned maxLeaf = __get_cpuid_max(0, nullptr);
  if (maxLeaf < 7)
    return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.fma = fma;
  f.avx2 = b & (1u << 5);
  if (zmm) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
  }
  bool amxBf16 = d & (1u << 22), amxTile = d & (1u << 24);
  f.amx = tiles && amxBf16 && amxTile;
  unsigned subleaves = a;
  if (zmm && f.avx512f && subleaves >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = a & (1u << 5);
  }
#endif
  return f;
}

int blasCoreLevel(std::string_view core) {
  // OpenBLAS's x86-64 DYNAMIC_ARCH cores (driver/others/dynamic.c) by the
  // instructions their GEMM kernels use.
  static const struct {
    const char *name;
    int level;
  } levels[] = {
      {"Katmai", 1},      {"Coppermine", 1},  {"Northwood", 1},
      {"Prescott", 1},    {"Banias", 1},      {"Atom", 1},
      {"Core2", 1},       {"Penryn", 1},      {"Dunnington", 1},
      {"Nehalem", 1},     {"Athlon", 1},      {"Opteron", 1},
      {"Opteron_SSE3", 1}, {"Barcelona", 1},  {"Nano", 1},
      {"Bobcat", 1},      {"Sandybridge", 2}, {"Bulldozer", 2},
      {"Piledriver", 2},  {"Steamroller", 2}, {"Excavator", 2},
      {"Haswell", 3},     {"Zen", 3},         {"SkylakeX", 4},
      {"Cooperlake", 5},  {"SapphireRapids", 6},
  };
  for (const auto &entry : levels)
    if (equalNoCase(core, entry.name))
      return entry.level;
  return 0;
}

std::string bestBlasCoreFor(const CpuFeatures &f) {
  if (f.avx512() && f.avx512bf16)
    return "Cooperlake";
  if (f.avx512())
    return "SkylakeX";
  if (f.avx2 && f.fma)
    return "Haswell";
  return "";
}

const char *blasCoreSourceName(BlasCoreSource source) {
  switch (source) {
  case BlasCoreSource::Library:
    return "library";
  case BlasCoreSource::Corrected:
    return "corrected";
  case BlasCoreSource::Environment:
    return "OPENBLAS_CORETYPE";
  }
  return "library";
}

std::string BlasCoreReport::describe() const {
  std::string text = "OpenBLAS kernels " + core;
  switch (source) {
  case BlasCoreSource::Library:
    return text + " (the library's choice)";
  case BlasCoreSource::Corrected:
    text += " (corrected from " + libraryCore;
    if (!equalNoCase(core, requested))
      text += "; asked for " + requested;
    return text + ")";
  case BlasCoreSource::Environment:
    text += " (OPENBLAS_CORETYPE=" + requested;
    if (!cpuBest.empty() && blasCoreLevel(core) > 0 &&
        blasCoreLevel(core) < blasCoreLevel(cpuBest))
      text += "; this CPU supports " + cpuBest;
    return text + ")";
  }
  return text;
}

BlasCoreChoice chooseBlasCore(const CpuFeatures &features,
                              std::string_view libraryCore,
                              const char *coretypeEnv, const char *markerEnv) {
  BlasCoreChoice choice;
  BlasCoreReport &report = choice.report;
  report.core = std::string(libraryCore);
  report.cpuBest = bestBlasCoreFor(features);
  report.features = features.describe();
  if (coretypeEnv && *coretypeEnv) {
    // Set: by our restart (the marker names the same core) or by the user.
    report.requested = coretypeEnv;
    std::string_view marker = markerEnv ? markerEnv : "";
    size_t colon = marker.find(':');
    if (colon != std::string_view::npos &&
        equalNoCase(marker.substr(0, colon), coretypeEnv)) {
      report.source = BlasCoreSource::Corrected;
      report.libraryCore = std::string(marker.substr(colon + 1));
    } else {
      report.source = BlasCoreSource::Environment;
    }
    return choice;
  }
  int have = blasCoreLevel(libraryCore);
  if (have > 0 && !report.cpuBest.empty() &&
      have < blasCoreLevel(report.cpuBest))
    choice.reexecWith = report.cpuBest;
  return choice;
}

namespace {

std::mutex reportMutex;
std::optional<BlasCoreReport> decided;

const char *libraryCoreName() {
  const char *name = openblas_get_corename();
  return name ? name : "";
}

} // namespace

void ensureBestBlasCore(char **argv) {
  std::lock_guard<std::mutex> lock(reportMutex);
  if (decided)
    return;
  const char *pretend = std::getenv(kBlasCorePretendEnv);
  std::string library =
      pretend && *pretend ? std::string(pretend) : libraryCoreName();
  BlasCoreChoice choice =
      chooseBlasCore(detectCpuFeatures(), library,
                     std::getenv("OPENBLAS_CORETYPE"),
                     std::getenv(kBlasCoreMarkerEnv));
  if (!choice.reexecWith.empty()) {
    std::string marker = choice.reexecWith + ":" + library;
    setenv("OPENBLAS_CORETYPE", choice.reexecWith.c_str(), 1);
    setenv(kBlasCoreMarkerEnv, marker.c_str(), 1);
    std::fflush(nullptr);
    execv("/proc/self/exe", argv);
    // No restart (no /proc?): run on with the library's kernels, and say so.
    std::fprintf(stderr,
                 "%s: warning: OpenBLAS chose %s kernels on a CPU that runs "
                 "%s, and restarting with OPENBLAS_CORETYPE=%s failed (%s); "
                 "set it yourself\n",
                 argv && argv[0] ? argv[0] : "partition", library.c_str(),
                 choice.reexecWith.c_str(), choice.reexecWith.c_str(),
                 std::strerror(errno));
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(kBlasCoreMarkerEnv);
    choice.report.source = BlasCoreSource::Library;
  }
  // What runs is what the loaded library says, whatever was asked.
  choice.report.core = libraryCoreName();
  decided = choice.report;
}

const BlasCoreReport &blasCoreReport() {
  {
    std::lock_guard<std::mutex> lock(reportMutex);
    if (decided)
      return *decided;
  }
  // Not called from main(): report without restarting.
  std::lock_guard<std::mutex> lock(reportMutex);
  if (!decided) {
    BlasCoreChoice choice =
        chooseBlasCore(detectCpuFeatures(), libraryCoreName(),
                       std::getenv("OPENBLAS_CORETYPE"),
                       std::getenv(kBlasCoreMarkerEnv));
    decided = choice.report;
  }
  return *decided;
}

} // namespace partition::runtime::cpu
