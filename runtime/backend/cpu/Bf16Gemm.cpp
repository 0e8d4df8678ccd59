//===- Bf16Gemm.cpp - bf16 linear-layer GEMMs on AMX, by oneDNN -----------===//
//
// Each GEMM is a oneDNN matmul primitive created once, on the instruction's
// fixed buffers, with a user-managed scratchpad: the primitives run one at a
// time, so they share the largest one, and its bytes are counted in the
// backend's workspace rather than hidden in the library. Row-major views of
// the layouts of Kernels.h (weight [out, in]):
//   Forward     x [M, K] (ab) times W seen as [K, N] (ba), bias [1, N]
//   GradInput   dy [M, N] (ab) times W [N, K] (ab)
//   GradWeight  dy seen as [N, M] (ba) times x [M, K] (ab)
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Bf16Gemm.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#ifdef PARTITION_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace partition::runtime::cpu {

namespace {

constexpr const char *kWidened = "fp32 sgemm on widened copies";

#ifdef PARTITION_HAVE_ONEDNN
/// Whether `isa` (a dnnl_cpu_isa_t, a set of feature bits) includes `part`.
bool includes(unsigned isa, dnnl_cpu_isa_t part) {
  return (isa & unsigned(part)) == unsigned(part);
}

/// The best instruction set oneDNN may dispatch to here, by name.
std::string effectiveIsaName() {
  const unsigned isa = dnnl_get_effective_cpu_isa();
  if (includes(isa, dnnl_cpu_isa_avx512_core_amx))
    return "avx512_core_amx";
  if (includes(isa, dnnl_cpu_isa_avx512_core_bf16))
    return "avx512_core_bf16";
  if (includes(isa, dnnl_cpu_isa_avx512_core))
    return "avx512_core";
  if (includes(isa, dnnl_cpu_isa_avx2))
    return "avx2";
  return "below avx2";
}

std::string oneDnnName() {
  const dnnl_version_t *version = dnnl_version();
  return "oneDNN " + std::to_string(version->major) + "." +
         std::to_string(version->minor) + "." +
         std::to_string(version->patch) + " on " + effectiveIsaName();
}
#endif

} // namespace

Bf16GemmChoice chooseBf16Gemm(std::string_view wanted, OneDnnBf16 oneDnn,
                              const std::string &name) {
  if (!wanted.empty() && wanted != "onednn" && wanted != "widen")
    throw std::runtime_error(std::string(kBf16GemmEnv) + "=" +
                             std::string(wanted) +
                             ": expected `onednn` or `widen`");
  const std::string variable =
      std::string(kBf16GemmEnv) + "=" + std::string(wanted);
  const bool forced = wanted == "onednn";
  if (wanted == "widen")
    return {Bf16GemmEngine::Widen, "widen", kWidened + (" (" + variable + ")")};
  switch (oneDnn) {
  case OneDnnBf16::Absent:
    if (forced)
      throw std::runtime_error(
          variable + ": this build has no oneDNN; install libdnnl-dev "
                     "(scripts/setup.sh does) and rebuild, or unset it");
    return {Bf16GemmEngine::Widen, "widen",
            std::string(kWidened) + " (built without oneDNN)"};
  case OneDnnBf16::None:
    return {Bf16GemmEngine::Widen, "widen",
            std::string(kWidened) +
                (forced ? " (" + variable + ", but " + name +
                              " has no bf16 matmul)"
                        : " (no AMX for " + name + ")")};
  case OneDnnBf16::Slower:
    if (!forced)
      return {Bf16GemmEngine::Widen, "widen",
              std::string(kWidened) + " (no AMX for " + name + ")"};
    break;
  case OneDnnBf16::Amx:
    break;
  }
  return {Bf16GemmEngine::OneDnn, "onednn",
          name + (forced ? " (" + variable + ")" : "")};
}

const Bf16GemmChoice &bf16GemmChoice() {
  static const Bf16GemmChoice choice = [] {
    const char *env = std::getenv(kBf16GemmEnv);
#ifdef PARTITION_HAVE_ONEDNN
    const unsigned isa = dnnl_get_effective_cpu_isa();
    const OneDnnBf16 oneDnn =
        includes(isa, dnnl_cpu_isa_avx512_core_amx) ? OneDnnBf16::Amx
        : includes(isa, dnnl_cpu_isa_avx512_core)   ? OneDnnBf16::Slower
                                                    : OneDnnBf16::None;
    return chooseBf16Gemm(env ? env : "", oneDnn, oneDnnName());
#else
    return chooseBf16Gemm(env ? env : "", OneDnnBf16::Absent, "");
#endif
  }();
  return choice;
}

#ifdef PARTITION_HAVE_ONEDNN

/// One GEMM: its primitive and the arguments it always runs with.
struct Bf16Gemm {
  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
  std::unordered_map<int, dnnl::memory> arguments;
  /// The scratchpad allocation `arguments` points at (0: none yet).
  unsigned boundTo = 0;
};

struct Bf16Gemms::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::size_t scratchpadBytes = 0;
  struct Free {
    void operator()(std::uint8_t *bytes) const {
      ::operator delete[](bytes, std::align_val_t(64));
    }
  };
  std::unique_ptr<std::uint8_t[], Free> scratchpad;
  std::size_t allocated = 0;
  unsigned allocation = 0;

  void run(Bf16Gemm &gemm) {
    if (gemm.scratchpad.get_size() > 0 && gemm.boundTo != allocation) {
      gemm.arguments[DNNL_ARG_SCRATCHPAD] =
          dnnl::memory(gemm.scratchpad, engine, scratchpad.get());
      gemm.boundTo = allocation;
    }
    gemm.primitive.execute(stream, gemm.arguments);
    stream.wait();
  }

  /// Allocated at the first run, when every GEMM has been compiled.
  void allocate() {
    if (allocated >= scratchpadBytes)
      return;
    scratchpad.reset(static_cast<std::uint8_t *>(
        ::operator new[](scratchpadBytes, std::align_val_t(64))));
    allocated = scratchpadBytes;
    ++allocation;
  }
};

Bf16Gemms::Bf16Gemms() : impl(std::make_unique<Impl>()) {}
Bf16Gemms::~Bf16Gemms() = default;

std::size_t Bf16Gemms::scratchpadBytes() const {
  return impl->scratchpadBytes;
}

std::function<void()>
Bf16Gemms::compile(LinearProduct product, const std::uint16_t *a,
                   const std::uint16_t *b, const std::uint16_t *bias,
                   std::uint16_t *result, Index rows, Index inFeatures,
                   Index outFeatures) {
  if (rows <= 0 || inFeatures <= 0 || outFeatures <= 0)
    return {};
  using Tag = dnnl::memory::format_tag;
  const auto bf16 = dnnl::memory::data_type::bf16;
  const dnnl::memory::dim m = rows, k = inFeatures, n = outFeatures;
  dnnl::memory::desc source, weights, destination, biasDesc;
  switch (product) {
  case LinearProduct::Forward:
    source = {{m, k}, bf16, Tag::ab};
    weights = {{k, n}, bf16, Tag::ba};
    destination = {{m, n}, bf16, Tag::ab};
    if (bias)
      biasDesc = {{1, n}, bf16, Tag::ab};
    break;
  case LinearProduct::GradInput:
    source = {{m, n}, bf16, Tag::ab};
    weights = {{n, k}, bf16, Tag::ab};
    destination = {{m, k}, bf16, Tag::ab};
    break;
  case LinearProduct::GradWeight:
    source = {{n, m}, bf16, Tag::ba};
    weights = {{m, k}, bf16, Tag::ab};
    destination = {{n, k}, bf16, Tag::ab};
    break;
  }
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto gemm = std::make_shared<Bf16Gemm>();
  try {
    dnnl::matmul::primitive_desc description(
        dnnl::matmul::desc(source, weights, biasDesc, destination), attributes,
        impl->engine);
    // oneDNN's reference kernels are far slower than widening: keep those.
    if (std::string_view(description.impl_info_str()).substr(0, 3) == "ref")
      return {};
    gemm->primitive = dnnl::matmul(description);
    gemm->scratchpad = description.scratchpad_desc();
  } catch (const dnnl::error &) {
    return {}; // no bf16 matmul for this shape here: the widened one runs
  }
  auto bind = [&](int argument, const dnnl::memory::desc &desc,
                  const std::uint16_t *data) {
    gemm->arguments[argument] = dnnl::memory(
        desc, impl->engine, const_cast<std::uint16_t *>(data));
  };
  bind(DNNL_ARG_SRC, source, a);
  bind(DNNL_ARG_WEIGHTS, weights, b);
  bind(DNNL_ARG_DST, destination, result);
  if (bias)
    bind(DNNL_ARG_BIAS, biasDesc, bias);
  impl->scratchpadBytes =
      std::max(impl->scratchpadBytes, gemm->scratchpad.get_size());
  Impl *state = impl.get();
  return [state, gemm] {
    state->allocate();
    state->run(*gemm);
  };
}

#else // !PARTITION_HAVE_ONEDNN

struct Bf16Gemms::Impl {};

Bf16Gemms::Bf16Gemms() {
  throw std::runtime_error("bf16 GEMMs by oneDNN: this build has no oneDNN");
}
Bf16Gemms::~Bf16Gemms() = default;
std::size_t Bf16Gemms::scratchpadBytes() const { return 0; }
std::function<void()> Bf16Gemms::compile(LinearProduct, const std::uint16_t *,
                                         const std::uint16_t *,
                                         const std::uint16_t *, std::uint16_t *,
                                         Index, Index, Index) {
  return {};
}

#endif

} // namespace partition::runtime::cpu
