//===- BlasCoreTest.cpp - which OpenBLAS kernels a process runs -----------===//
//
// chooseBlasCore() alone: CPU features + the library's core + the
// environment -> restart with a better core, or keep. Pure, so the same on
// every machine (Zen 3 AVX2-only, Intel AVX-512/AMX, this Zen 4 alike).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/BlasCore.h"

#include <gtest/gtest.h>

namespace cpu = partition::runtime::cpu;

namespace {

cpu::CpuFeatures avx2Only() {
  cpu::CpuFeatures f;
  f.avx2 = f.fma = true;
  return f;
}

cpu::CpuFeatures avx512() {
  cpu::CpuFeatures f = avx2Only();
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  return f;
}

cpu::CpuFeatures avx512Bf16Amx() {
  cpu::CpuFeatures f = avx512();
  f.avx512bf16 = f.amx = true;
  return f;
}

cpu::BlasCoreChoice unset(const cpu::CpuFeatures &f, const char *library) {
  return cpu::chooseBlasCore(f, library, nullptr, nullptr);
}

TEST(BlasCore, BestCoreForFeatures) {
  EXPECT_EQ(cpu::bestBlasCoreFor(avx512Bf16Amx()), "Cooperlake");
  EXPECT_EQ(cpu::bestBlasCoreFor(avx512()), "SkylakeX");
  EXPECT_EQ(cpu::bestBlasCoreFor(avx2Only()), "Haswell");
  EXPECT_EQ(cpu::bestBlasCoreFor(cpu::CpuFeatures{}), "");
  // AVX-512 needs all four of F, BW, VL, DQ (SkylakeX's kernels use them).
  cpu::CpuFeatures partial = avx2Only();
  partial.avx512f = partial.avx512vl = true;
  EXPECT_EQ(cpu::bestBlasCoreFor(partial), "Haswell");
  // BF16 without the AVX-512 set it extends is not Cooperlake.
  partial.avx512bf16 = true;
  EXPECT_EQ(cpu::bestBlasCoreFor(partial), "Haswell");
  // AVX2 without FMA: no Haswell kernels.
  cpu::CpuFeatures noFma;
  noFma.avx2 = true;
  EXPECT_EQ(cpu::bestBlasCoreFor(noFma), "");
}

// The reported case: 0.3.21 runs SSE3 Prescott kernels on a Xeon with
// AVX-512, AVX512-BF16 and AMX.
TEST(BlasCore, PrescottOnAvx512Bf16RestartsWithCooperlake) {
  cpu::BlasCoreChoice c = unset(avx512Bf16Amx(), "Prescott");
  EXPECT_EQ(c.reexecWith, "Cooperlake");
  EXPECT_EQ(unset(avx512(), "Prescott").reexecWith, "SkylakeX");
  EXPECT_EQ(unset(avx2Only(), "Prescott").reexecWith, "Haswell");
  EXPECT_EQ(unset(avx2Only(), "Sandybridge").reexecWith, "Haswell");
  EXPECT_EQ(unset(avx512Bf16Amx(), "Haswell").reexecWith, "Cooperlake");
  EXPECT_EQ(unset(avx512Bf16Amx(), "SkylakeX").reexecWith, "Cooperlake");
}

TEST(BlasCore, GoodEnoughChoiceIsKept) {
  for (const char *core : {"Haswell", "Zen", "HASWELL", "SkylakeX"}) {
    cpu::BlasCoreChoice c = unset(avx2Only(), core);
    EXPECT_EQ(c.reexecWith, "") << core;
    EXPECT_EQ(c.report.source, cpu::BlasCoreSource::Library) << core;
    EXPECT_EQ(c.report.core, core);
  }
  EXPECT_EQ(unset(avx512Bf16Amx(), "Cooperlake").reexecWith, "");
  EXPECT_EQ(unset(avx512Bf16Amx(), "cooperlake").reexecWith, "");
  EXPECT_EQ(unset(avx512(), "SkylakeX").reexecWith, "");
  // A core this table does not know (a newer library's) is left alone.
  EXPECT_EQ(unset(avx512Bf16Amx(), "SapphireRapids").reexecWith, "");
  EXPECT_EQ(unset(avx512Bf16Amx(), "SomeFutureCore").reexecWith, "");
  EXPECT_EQ(unset(avx512Bf16Amx(), "").reexecWith, "");
  // Nothing better than SSE to offer: keep.
  EXPECT_EQ(unset(cpu::CpuFeatures{}, "Prescott").reexecWith, "");
}

TEST(BlasCore, UserCoretypeIsRespected) {
  cpu::BlasCoreChoice c =
      cpu::chooseBlasCore(avx512Bf16Amx(), "Prescott", "Prescott", nullptr);
  EXPECT_EQ(c.reexecWith, "");
  EXPECT_EQ(c.report.source, cpu::BlasCoreSource::Environment);
  EXPECT_EQ(c.report.core, "Prescott");
  EXPECT_EQ(c.report.describe(),
            "OpenBLAS kernels Prescott (OPENBLAS_CORETYPE=Prescott; this CPU "
            "supports Cooperlake)");
  // Even a name the library does not know, and a marker for another core.
  c = cpu::chooseBlasCore(avx512Bf16Amx(), "Cooperlake", "Nonsense",
                          "Cooperlake:Prescott");
  EXPECT_EQ(c.reexecWith, "");
  EXPECT_EQ(c.report.source, cpu::BlasCoreSource::Environment);
  c = cpu::chooseBlasCore(avx2Only(), "Haswell", "Haswell", nullptr);
  EXPECT_EQ(c.report.describe(),
            "OpenBLAS kernels Haswell (OPENBLAS_CORETYPE=Haswell)");
}

TEST(BlasCore, RestartedProcessReportsTheCorrection) {
  // After the restart OPENBLAS_CORETYPE and the marker agree: never again.
  cpu::BlasCoreChoice c = cpu::chooseBlasCore(
      avx512Bf16Amx(), "Cooperlake", "Cooperlake", "Cooperlake:Prescott");
  EXPECT_EQ(c.reexecWith, "");
  EXPECT_EQ(c.report.source, cpu::BlasCoreSource::Corrected);
  EXPECT_EQ(c.report.libraryCore, "Prescott");
  EXPECT_EQ(c.report.describe(),
            "OpenBLAS kernels Cooperlake (corrected from Prescott)");
  // Even if the library still runs a weaker core: report it, do not loop.
  c = cpu::chooseBlasCore(avx512Bf16Amx(), "SkylakeX", "Cooperlake",
                          "Cooperlake:Prescott");
  EXPECT_EQ(c.reexecWith, "");
  EXPECT_EQ(c.report.describe(), "OpenBLAS kernels SkylakeX (corrected from "
                                 "Prescott; asked for Cooperlake)");
}

TEST(BlasCore, SourceNames) {
  EXPECT_STREQ(cpu::blasCoreSourceName(cpu::BlasCoreSource::Library),
               "library");
  EXPECT_STREQ(cpu::blasCoreSourceName(cpu::BlasCoreSource::Corrected),
               "corrected");
  EXPECT_STREQ(cpu::blasCoreSourceName(cpu::BlasCoreSource::Environment),
               "OPENBLAS_CORETYPE");
  EXPECT_EQ(unset(avx2Only(), "Haswell").report.describe(),
            "OpenBLAS kernels Haswell (the library's choice)");
}

TEST(BlasCore, Levels) {
  EXPECT_LT(cpu::blasCoreLevel("Prescott"), cpu::blasCoreLevel("Sandybridge"));
  EXPECT_LT(cpu::blasCoreLevel("Sandybridge"), cpu::blasCoreLevel("Haswell"));
  EXPECT_EQ(cpu::blasCoreLevel("Zen"), cpu::blasCoreLevel("Haswell"));
  EXPECT_LT(cpu::blasCoreLevel("Haswell"), cpu::blasCoreLevel("SkylakeX"));
  EXPECT_LT(cpu::blasCoreLevel("SkylakeX"), cpu::blasCoreLevel("Cooperlake"));
  EXPECT_EQ(cpu::blasCoreLevel("nonsense"), 0);
}

// The machine's own features: whatever they are, consistent.
TEST(BlasCore, DetectedFeaturesAreConsistent) {
  cpu::CpuFeatures f = cpu::detectCpuFeatures();
  if (f.avx512bf16) {
    EXPECT_TRUE(f.avx512f);
  }
  if (f.avx512f) {
    EXPECT_TRUE(f.avx2);
  }
  EXPECT_FALSE(f.describe().empty());
  // The report of a process that never called ensureBestBlasCore names the
  // core the library runs.
  EXPECT_FALSE(cpu::blasCoreReport().core.empty());
}

} // namespace
