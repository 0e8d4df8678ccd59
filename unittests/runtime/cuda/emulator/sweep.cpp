//===- sweep.cpp - emulated CUDA kernels against the CPU kernels ----------===//
//
// Emulated CUDA kernels (runtime/backend/cuda/kernels, compiled through the emu
// shim) against the CPU kernels on random inputs: odd sizes, pack tails,
// block boundaries, misaligned pointers, in-place aliasing, bad ids.
// Tolerances as unittests/runtime/cuda/kernels/KernelsTest.cpp.
#include "emu.h"
#include "runtime/backend/cpu/Kernels.h"
#include "runtime/backend/cuda/kernels/Kernels.h"
#include <climits>
#include <cstdarg>
#include <string>
#include <type_traits>

namespace cpu = partition::runtime::cpu;
namespace gpu = partition::runtime::cuda;
using Index = std::int64_t;
using bf16 = __nv_bfloat16;
using FVec = std::vector<float>;
using IVec = std::vector<std::int32_t>;

static constexpr double kFp32 = 1e-5, kBf16 = 1.0 / 256 + 1e-5, kSmall = 1e-3, kCancel = 0.1;
static long checks = 0, fails = 0;
static std::mt19937 rng(2024);
static std::string ctx;
static bool quick = getenv("EMU_QUICK") != nullptr;

static float rb(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
template <typename T> static double rtolOf() { return std::is_same_v<T, float> ? kFp32 : kBf16; }
template <typename T> static FVec rounded(FVec v) {
  if constexpr (!std::is_same_v<T, float>) for (float &x : v) x = rb(x);
  return v;
}
static FVec rnd(std::size_t n, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  FVec v(n);
  for (auto &x : v) x = d(rng);
  return v;
}
static IVec ids(std::size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi - 1);
  IVec v(n);
  for (auto &x : v) x = d(rng);
  return v;
}

// "Device" buffer: exact-size heap block (ASan), with an element offset so
// that the pointer can be misaligned; NaN/0xFF garbage before upload.
template <typename T> struct Buf {
  std::unique_ptr<char[]> mem;
  T *p;
  std::size_t n;
  Buf(std::size_t n, int offset = 0) : n(n) {
    // 256-aligned base + offset elements, allocation ends exactly at p + n.
    const std::size_t bytes = (n + offset) * sizeof(T);
    void *base = nullptr;
    if (posix_memalign(&base, 256, bytes ? bytes : 1)) std::abort();
    mem.reset(static_cast<char *>(base));
    std::memset(base, 0xFF, bytes);
    p = reinterpret_cast<T *>(base) + offset;
  }
  ~Buf() { free(mem.release()); }
  void up(const FVec &v) {
    for (std::size_t i = 0; i < n; ++i)
      if constexpr (std::is_same_v<T, float>) p[i] = v[i]; else p[i] = __float2bfloat16_rn(v[i]);
  }
  FVec down() const {
    FVec v(n);
    for (std::size_t i = 0; i < n; ++i)
      if constexpr (std::is_same_v<T, float>) v[i] = p[i]; else v[i] = __bfloat162float(p[i]);
    return v;
  }
};
template <typename T> static std::unique_ptr<Buf<T>> dev(const FVec &v, int off = 0) {
  auto b = std::make_unique<Buf<T>>(v.size(), off);
  b->up(v);
  return b;
}
static std::unique_ptr<Buf<std::int32_t>> devI(const IVec &v, int off = 0) {
  auto b = std::make_unique<Buf<std::int32_t>>(v.size(), off);
  for (std::size_t i = 0; i < v.size(); ++i) b->p[i] = v[i];
  return b;
}

static void close(const char *what, const FVec &a, const FVec &e, double rtol, double floorFrac, double absFloor = 0) {
  ++checks;
  bool ok = a.size() == e.size();
  double scale = 0;
  for (float x : e) if (std::isfinite(x)) scale = std::max(scale, double(std::abs(x)));
  const double fl = std::max({floorFrac * scale, 1e-30, absFloor});
  std::size_t bad = 0, wi = 0;
  double worst = -1;
  for (std::size_t i = 0; ok && i < a.size(); ++i) {
    double err;
    if (std::isnan(e[i]) || std::isnan(a[i])) err = std::isnan(e[i]) && std::isnan(a[i]) ? 0 : INFINITY;
    else if (std::isinf(e[i]) || std::isinf(a[i])) err = a[i] == e[i] ? 0 : INFINITY;
    else err = std::abs(double(a[i]) - e[i]) / std::max(double(std::abs(e[i])), fl);
    if (!(err <= rtol)) ++bad;
    if (err > worst) { worst = err; wi = i; }
  }
  if (!ok || bad) {
    ++fails;
    std::printf("FAIL %s [%s]: %zu/%zu bad, worst [%zu] %.9g vs %.9g rel %.3g\n", what, ctx.c_str(), bad,
                a.size(), wi, a.empty() ? 0.f : a[wi], e.empty() ? 0.f : e[wi], worst);
  }
}
static void exact(const char *what, const FVec &a, const FVec &e) {
  ++checks;
  bool ok = a.size() == e.size();
  std::size_t i = 0;
  for (; ok && i < a.size(); ++i) if (std::memcmp(&a[i], &e[i], 4)) { ok = false; break; }
  if (!ok) { ++fails; std::printf("FAIL exact %s [%s] at %zu: %g vs %g\n", what, ctx.c_str(), i, i < a.size() ? a[i] : 0.f, i < e.size() ? e[i] : 0.f); }
}
static void expect(const char *what, bool c) {
  ++checks;
  if (!c) { ++fails; std::printf("FAIL %s [%s]\n", what, ctx.c_str()); }
}
static void noLaunchErrors() { expect("no emulated launch failure", emu::failures == 0); emu::failures = 0; }
static int badFlag = 0;
static std::string S(const char *f, ...) {
  char b[256]; va_list a; va_start(a, f); vsnprintf(b, sizeof b, f, a); va_end(a); return b;
}

//===----------------------------------------------------------------------===//
template <typename T> static void elementwise() {
  for (Index n : {1, 7, 8, 9, 15, 16, 17, 255, 2047, 2048 * 8 + 5, 70001}) for (int off : {0, 1}) {
    if (quick && n > 20000) continue;
    ctx = S("%s n=%ld off=%d", std::is_same_v<T, float> ? "fp32" : "bf16", n, off);
    const FVec x = rounded<T>(rnd(n, -6, 6)), y = rounded<T>(rnd(n, -3, 3)), dy = rounded<T>(rnd(n));
    FVec gelu(n), geluG(n), sw(n), gg(n), ug(n), sum(n), sc(n);
    cpu::gelu(x.data(), gelu.data(), n);
    cpu::geluGrad(dy.data(), x.data(), geluG.data(), n);
    cpu::swiglu(x.data(), y.data(), sw.data(), n);
    cpu::swigluGrad(dy.data(), x.data(), y.data(), gg.data(), ug.data(), n);
    cpu::add(x.data(), y.data(), sum.data(), n);
    cpu::scale(x.data(), -0.3f, sc.data(), n);
    const double rt = rtolOf<T>();
    auto X = dev<T>(x, off), Y = dev<T>(y, off), DY = dev<T>(dy, off);
    Buf<T> a(n, off), b(n, off);
    gpu::gelu<T>(X->p, a.p, n, 0); close("gelu", a.down(), gelu, rt, kSmall);
    gpu::geluGrad<T>(DY->p, X->p, a.p, n, 0); close("geluGrad", a.down(), geluG, rt, kCancel);
    gpu::swiglu<T>(X->p, Y->p, a.p, n, 0); close("swiglu", a.down(), sw, rt, kSmall);
    gpu::swigluGrad<T>(DY->p, X->p, Y->p, a.p, b.p, n, 0);
    close("swigluGrad gate", a.down(), gg, rt, kCancel); close("swigluGrad up", b.down(), ug, rt, kSmall);
    gpu::add<T>(X->p, Y->p, a.p, n, 0); close("add", a.down(), sum, rt, kCancel);
    gpu::scale<T>(X->p, -0.3f, a.p, n, 0); close("scale", a.down(), sc, rt, kSmall);
    // Aliasing, every exact pairing.
    { auto A = dev<T>(x, off); gpu::gelu<T>(A->p, A->p, n, 0); close("gelu inplace", A->down(), gelu, rt, kSmall); }
    { auto A = dev<T>(dy, off); gpu::geluGrad<T>(A->p, X->p, A->p, n, 0); close("geluGrad res=grad", A->down(), geluG, rt, kCancel); }
    { auto A = dev<T>(x, off); gpu::geluGrad<T>(DY->p, A->p, A->p, n, 0); close("geluGrad res=input", A->down(), geluG, rt, kCancel); }
    { auto A = dev<T>(x, off); gpu::swiglu<T>(A->p, Y->p, A->p, n, 0); close("swiglu res=gate", A->down(), sw, rt, kSmall); }
    { auto A = dev<T>(y, off); gpu::swiglu<T>(X->p, A->p, A->p, n, 0); close("swiglu res=up", A->down(), sw, rt, kSmall); }
    { auto G = dev<T>(x, off), U = dev<T>(y, off); gpu::swigluGrad<T>(DY->p, G->p, U->p, G->p, U->p, n, 0);
      close("swigluGrad inplace gate", G->down(), gg, rt, kCancel); close("swigluGrad inplace up", U->down(), ug, rt, kSmall); }
    { auto G = dev<T>(dy, off); Buf<T> u(n, off); gpu::swigluGrad<T>(G->p, X->p, Y->p, G->p, u.p, n, 0);
      close("swigluGrad gate=grad", G->down(), gg, rt, kCancel); close("swigluGrad up (gate=grad)", u.down(), ug, rt, kSmall); }
    { auto A = dev<T>(x, off); gpu::add<T>(A->p, Y->p, A->p, n, 0); close("add res=lhs", A->down(), sum, rt, kCancel); }
    { auto A = dev<T>(y, off); gpu::add<T>(X->p, A->p, A->p, n, 0); close("add res=rhs", A->down(), sum, rt, kCancel); }
    { auto A = dev<T>(x, off); gpu::scale<T>(A->p, -0.3f, A->p, n, 0); close("scale inplace", A->down(), sc, rt, kSmall); }
  }
  noLaunchErrors();
}

static void conversions() {
  for (Index n : {0, 1, 7, 8, 9, 1003}) for (int off : {0, 1, 2}) {
    ctx = S("n=%ld off=%d", n, off);
    FVec v = rnd(n, -100, 100);
    if (n > 4) { v[0] = INFINITY; v[1] = -0.0f; v[2] = NAN; v[3] = 3.0e38f; v[4] = 1.00390625f; }
    FVec eb(n); for (Index i = 0; i < n; ++i) eb[i] = rb(v[i]);
    auto in = dev<float>(v, off);
    Buf<bf16> h(n, off), h2(n, off); Buf<float> back(n, off), copy(n, off);
    gpu::cast<float, bf16>(in->p, h.p, n, 0);
    gpu::cast<bf16, float>(h.p, back.p, n, 0);
    gpu::cast<bf16, bf16>(h.p, h2.p, n, 0);
    gpu::cast<float, float>(in->p, copy.p, n, 0);
    exact("cast f->b", h.down(), eb); exact("cast b->f", back.down(), eb); exact("cast b->b", h2.down(), eb);
    exact("cast f->f", copy.down(), v);
    Buf<float> f(n, off); Buf<bf16> fb(n, off);
    gpu::fill<float>(f.p, 0.1f, n, 0); gpu::fill<bf16>(fb.p, 0.1f, n, 0);
    exact("fill f", f.down(), FVec(n, 0.1f)); exact("fill b", fb.down(), FVec(n, rb(0.1f)));
    Buf<std::int32_t> a(n, off), b(n, off);
    gpu::fillI32(a.p, INT_MAX, n, 0); gpu::fillI32(b.p, 3, n, 0); gpu::addI32(a.p, b.p, a.p, n, 0);
    bool ok = true; for (Index i = 0; i < n; ++i) ok &= a.p[i] == INT_MIN + 2; expect("addI32 wraps in place", ok);
    Buf<float> c(n, off); gpu::copyBytes(in->p, c.p, n * 4, 0); exact("copyBytes", c.down(), v);
  }
  noLaunchErrors();
}

static void adamw() {
  for (Index n : {1, 9, 10001}) for (int off : {0, 1}) for (int step : {1, 7, 100000}) for (bool inPlace : {false, true}) {
    ctx = S("n=%ld off=%d step=%d inplace=%d", n, off, step, inPlace);
    const FVec p = rnd(n), g = rnd(n), m = rnd(n, -.1f, .1f), v = rnd(n, 0, .01f);
    cpu::AdamWConfig cc; cc.weightDecay = 0.1f; gpu::AdamWConfig gc; gc.weightDecay = 0.1f;
    const float lr = 3e-3f;
    FVec ep(n), em(n), ev(n);
    cpu::adamw(p.data(), g.data(), m.data(), v.data(), &step, &lr, ep.data(), em.data(), ev.data(), n, cc);
    auto P = dev<float>(p, off), G = dev<float>(g, off), M = dev<float>(m, off), V = dev<float>(v, off);
    auto St = devI({step}); auto Lr = dev<float>({lr});
    Buf<float> np(n, off), nm(n, off), nv(n, off);
    gpu::adamw(P->p, G->p, M->p, V->p, St->p, Lr->p, inPlace ? P->p : np.p, inPlace ? M->p : nm.p,
               inPlace ? V->p : nv.p, n, gc, 0);
    close("adamw p", (inPlace ? *P : np).down(), ep, kFp32, kCancel);
    close("adamw m", (inPlace ? *M : nm).down(), em, kFp32, kCancel);
    close("adamw v", (inPlace ? *V : nv).down(), ev, kFp32, kCancel);
  }
  // adamw_block: block b of a flat parameter, as adamw on its copy (bit for
  // bit: the same kernel on the same values); a block outside [0, blocks)
  // flags badId and writes nothing.
  auto *bad = devI({0}).release();
  for (Index n : {1, 9, 12, 10001}) for (int off : {0, 1}) for (int block : {0, 2, 3, -1}) {
    ctx = S("adamw_block n=%ld off=%d block=%d", n, off, block);
    const Index blocks = 3;
    const FVec p = rnd(n * blocks), g = rnd(n), m = rnd(n, -.1f, .1f), v = rnd(n, 0, .01f);
    gpu::AdamWConfig gc; gc.weightDecay = 0.1f;
    const int step = 7; const float lr = 3e-3f;
    const bool inside = block >= 0 && block < blocks;
    const FVec chunk = inside ? FVec(p.begin() + block * n, p.begin() + (block + 1) * n) : FVec(n);
    auto C = dev<float>(chunk, off), P = dev<float>(p, off), G = dev<float>(g, off), M = dev<float>(m, off), V = dev<float>(v, off);
    auto St = devI({step}); auto Lr = dev<float>({lr}); auto B = devI({block});
    Buf<float> ep(n, off), em(n, off), ev(n, off), np(n, off), nm(n, off), nv(n, off);
    gpu::adamw(C->p, G->p, M->p, V->p, St->p, Lr->p, ep.p, em.p, ev.p, n, gc, 0);
    gpu::fill<float>(np.p, 0.5f, n, 0);
    bad->p[0] = 0;
    gpu::adamwBlock(P->p, B->p, blocks, G->p, M->p, V->p, St->p, Lr->p, np.p, nm.p, nv.p, n, gc, bad->p, 0);
    expect("adamw_block badId", bad->p[0] == (inside ? 0 : 1));
    if (!inside) { exact("adamw_block bad block writes nothing", np.down(), FVec(n, 0.5f)); continue; }
    exact("adamw_block p", np.down(), ep.down());
    exact("adamw_block m", nm.down(), em.down());
    exact("adamw_block v", nv.down(), ev.down());
  }
  noLaunchErrors();
}

template <typename T> static void embeddings() {
  const char *tn = std::is_same_v<T, float> ? "fp32" : "bf16";
  auto *bad = devI({0}).release();
  for (Index rows : {1, 50}) for (Index vocab : {1, 20}) for (Index ch : {1, 7, 8, 9, 37, 64, 1000, 8200, 9001}) for (int off : {0, 1}) {
    if (quick && ch > 1000) continue;
    ctx = S("%s emb rows=%ld vocab=%ld ch=%ld off=%d", tn, rows, vocab, ch, off);
    const FVec table = rounded<T>(rnd(vocab * ch));
    IVec tok = ids(rows, 0, vocab);
    IVec clean = tok;
    if (rows > 10) { tok[3] = vocab; tok[5] = -1; tok[7] = INT_MAX; tok[9] = INT_MIN; for (int r : {3, 5, 7, 9}) clean[r] = 0; }
    FVec e(rows * ch);
    cpu::embedding(clean.data(), table.data(), e.data(), rows, vocab, ch);
    if (rows > 10) for (int r : {3, 5, 7, 9}) std::fill_n(e.begin() + r * ch, ch, 0.f);
    auto Tb = dev<T>(table, off); auto Tk = devI(tok); Buf<T> res(rows * ch, off);
    bad->p[0] = 0;
    gpu::embedding<T>(Tk->p, Tb->p, res.p, rows, vocab, ch, bad->p, 0);
    exact("embedding", res.down(), e); expect("embedding badId", bad->p[0] == (rows > 10));
    gpu::embedding<T>(Tk->p, Tb->p, res.p, rows, vocab, ch, nullptr, 0); exact("embedding null badId", res.down(), e);
  }
  for (Index rows : {0, 1, 5, 300}) for (Index vocab : {1, 5, 700, 1025}) for (Index ch : {1, 7, 8, 9, 33, 64, 129, 1032}) for (bool acc : {false, true}) for (int off : {0, 1}) {
    if (rows * vocab * ch > 300 * 700 * 64) continue;
    if (quick && (vocab > 700 || ch > 129 || (rows == 300 && vocab == 700))) continue;
    ctx = S("%s embGrad rows=%ld vocab=%ld ch=%ld acc=%d off=%d", tn, rows, vocab, ch, acc, off);
    const FVec grad = rounded<T>(rnd(rows * ch)), init = rounded<T>(rnd(vocab * ch));
    IVec tok = ids(rows, 0, vocab);
    FVec cleanGrad = grad; IVec clean = tok;
    if (rows >= 5) { tok[1] = vocab; tok[3] = -7; clean[1] = clean[3] = 0; std::fill_n(cleanGrad.begin() + 1 * ch, ch, 0.f); std::fill_n(cleanGrad.begin() + 3 * ch, ch, 0.f); }
    FVec e = init;
    cpu::embeddingGrad(cleanGrad.data(), clean.data(), e.data(), rows, vocab, ch, acc);
    auto G = dev<T>(grad, off); auto Tk = devI(tok);
    std::size_t wsb = gpu::embeddingGradWorkspaceSize(rows, vocab, ch);
    Buf<unsigned char> ws(wsb);
    std::vector<float> first;
    for (int run = 0; run < 2; ++run) {
      auto R = dev<T>(init, off);
      bad->p[0] = 0;
      gpu::embeddingGrad<T>(G->p, Tk->p, R->p, rows, vocab, ch, acc, wsb ? ws.p : nullptr, bad->p, 0);
      if (run == 0) { first = R->down(); close("embeddingGrad", first, e, rtolOf<T>(), kCancel); expect("embGrad badId", bad->p[0] == (rows >= 5)); }
      else exact("embeddingGrad reproducible", R->down(), first);
    }
  }
  for (Index batch : {1, 3, 5, 8}) for (Index seq : {1, 10}) for (Index ch : {1, 7, 8, 37, 64, 2000}) for (int off : {0, 1}) {
    ctx = S("%s pos b=%ld s=%ld ch=%ld off=%d", tn, batch, seq, ch, off);
    const Index positions = seq + 3;
    const FVec in = rounded<T>(rnd(batch * seq * ch)), table = rounded<T>(rnd(positions * ch));
    FVec e(in.size());
    cpu::positionEmbedding(in.data(), table.data(), e.data(), batch, seq, ch);
    auto I = dev<T>(in, off); auto Tb = dev<T>(table, off); Buf<T> r(in.size(), off);
    gpu::positionEmbedding<T>(I->p, Tb->p, r.p, batch, seq, ch, 0);
    close("posEmb", r.down(), e, rtolOf<T>(), kCancel);
    gpu::positionEmbedding<T>(I->p, Tb->p, I->p, batch, seq, ch, 0);
    close("posEmb inplace", I->down(), e, rtolOf<T>(), kCancel);
    const FVec g = rounded<T>(rnd(batch * seq * ch));
    FVec eg(positions * ch);
    cpu::positionEmbeddingGrad(g.data(), eg.data(), batch, seq, positions, ch);
    auto Gd = dev<T>(g, off); Buf<T> tg(positions * ch, off);
    gpu::positionEmbeddingGrad<T>(Gd->p, tg.p, batch, seq, positions, ch, 0);
    close("posEmbGrad", tg.down(), eg, rtolOf<T>(), kCancel);
  }
  delete bad;
  noLaunchErrors();
}

template <typename T> static void norms() {
  const char *tn = std::is_same_v<T, float> ? "fp32" : "bf16";
  struct Sh { Index rows, ch; };
  for (Sh s : {Sh{1, 1}, Sh{1, 7}, Sh{9, 8}, Sh{8, 31}, Sh{17, 33}, Sh{300, 37}, Sh{1, 768}, Sh{3, 1023},
               Sh{2, 1024}, Sh{3, 1025}, Sh{2, 8191}, Sh{1, 8192}, Sh{2, 8200}, Sh{1, 6144}, Sh{1, 12288}})
    for (int off : {0, 1}) {
      if (off && s.ch > 2000) continue;
      if (quick && s.ch > 1025 && !(s.ch == 8192 || s.ch == 6144)) continue;
      ctx = S("%s rows=%ld ch=%ld off=%d", tn, s.rows, s.ch, off);
      const Index n = s.rows * s.ch;
      const float eps = 1e-5f;
      const FVec x = rounded<T>(rnd(n, -1.5f, 2.5f)), gm = rounded<T>(rnd(s.ch)), bt = rounded<T>(rnd(s.ch)), dy = rounded<T>(rnd(n));
      FVec e(n), edx(n), edg(s.ch), edb(s.ch), er(n), erdx(n), erdg(s.ch);
      cpu::layerNorm(x.data(), gm.data(), bt.data(), e.data(), s.rows, s.ch, eps);
      cpu::layerNormGrad(dy.data(), x.data(), gm.data(), edx.data(), edg.data(), edb.data(), s.rows, s.ch, eps);
      cpu::rmsNorm(x.data(), gm.data(), er.data(), s.rows, s.ch, eps);
      cpu::rmsNormGrad(dy.data(), x.data(), gm.data(), erdx.data(), erdg.data(), s.rows, s.ch, eps);
      auto X = dev<T>(x, off), Gm = dev<T>(gm, off), Bt = dev<T>(bt, off), Dy = dev<T>(dy, off);
      const double rt = rtolOf<T>();
      Buf<T> y(n, off), dx(n, off), dg(s.ch, off), db(s.ch, off);
      gpu::layerNorm<T>(X->p, Gm->p, Bt->p, y.p, s.rows, s.ch, eps, 0); close("layerNorm", y.down(), e, rt, kCancel);
      std::size_t wsb = gpu::layerNormGradWorkspaceSize(s.rows, s.ch);
      Buf<unsigned char> ws(wsb);
      gpu::layerNormGrad<T>(Dy->p, X->p, Gm->p, dx.p, dg.p, db.p, s.rows, s.ch, eps, ws.p, 0);
      // One channel: dx is a pure cancellation (exactly 0 for layernorm; g dy
      // eps / (x^2 + eps) for rmsnorm), each side's rounding noise scaled
      // by rstd: judge it against the terms' scale, |g dy| rstd.
      double gdy = 0;
      for (Index i = 0; i < n; ++i) gdy = std::max(gdy, double(std::abs(gm[i % s.ch] * dy[i])));
      const double dxFloor = s.ch == 1 ? gdy / std::sqrt(eps) : 0.0;
      close("layerNormGrad dx", dx.down(), edx, rt, kCancel, dxFloor); close("layerNormGrad dgamma", dg.down(), edg, rt, kCancel);
      close("layerNormGrad dbeta", db.down(), edb, rt, kCancel);
      gpu::rmsNorm<T>(X->p, Gm->p, y.p, s.rows, s.ch, eps, 0); close("rmsNorm", y.down(), er, rt, kSmall);
      std::size_t wsr = gpu::rmsNormGradWorkspaceSize(s.rows, s.ch);
      Buf<unsigned char> ws2(wsr);
      gpu::rmsNormGrad<T>(Dy->p, X->p, Gm->p, dx.p, dg.p, s.rows, s.ch, eps, ws2.p, 0);
      close("rmsNormGrad dx", dx.down(), erdx, rt, kCancel, dxFloor); close("rmsNormGrad dgamma", dg.down(), erdg, rt, kCancel);
    }
  ctx = S("%s norm grads, 0 rows", tn);
  Buf<T> g(8), b(8), d(8);
  gpu::layerNormGrad<T>(d.p, d.p, d.p, d.p, g.p, b.p, 0, 8, 1e-5f, nullptr, 0);
  exact("ln dgamma 0 rows", g.down(), FVec(8, 0.f)); exact("ln dbeta 0 rows", b.down(), FVec(8, 0.f));
  gpu::rmsNormGrad<T>(d.p, d.p, d.p, d.p, g.p, 0, 8, 1e-5f, nullptr, 0);
  noLaunchErrors();
}

template <typename T> static void bias() {
  const char *tn = std::is_same_v<T, float> ? "fp32" : "bf16";
  for (Index out : {1, 7, 8, 37, 96, 257, 300}) for (Index rows : {0, 1, 3, 9, 1000, 8300}) for (int off : {0, 1}) {
    if (rows == 8300 && out > 37) continue;
    if (quick && rows > 1000) continue;
    ctx = S("%s bias rows=%ld out=%ld off=%d", tn, rows, out, off);
    const FVec v = rounded<T>(rnd(rows * out)), bs = rounded<T>(rnd(out));
    FVec e = v;
    for (Index r = 0; r < rows; ++r) for (Index o = 0; o < out; ++o) e[r * out + o] += bs[o];
    auto V = dev<T>(v, off); auto B = dev<T>(bs, off);
    gpu::addBias<T>(V->p, B->p, rows, out, 0);
    close("addBias", V->down(), e, rtolOf<T>(), kCancel);
    const Index in = 2;
    FVec in_ = rnd(rows * in), wg(out * in), eb(out);
    cpu::linearGradWeight(v.data(), in_.data(), wg.data(), eb.data(), rows, in, out);
    if (rows > 1000) { // the CPU's sequential fp32 sum drifts past 1e-5 here: a double reference
      std::vector<double> d(out, 0.0);
      for (Index r = 0; r < rows; ++r) for (Index o = 0; o < out; ++o) d[o] += v[r * out + o];
      for (Index o = 0; o < out; ++o) eb[o] = float(d[o]);
    }
    auto G = dev<T>(v, off);
    std::size_t wsb = gpu::biasGradWorkspaceSize(rows, out);
    Buf<unsigned char> ws(wsb);
    Buf<T> bg(out, off);
    gpu::biasGrad<T>(G->p, bg.p, rows, out, wsb ? ws.p : nullptr, 0);
    close("biasGrad", bg.down(), eb, rtolOf<T>(), kCancel);
  }
  noLaunchErrors();
}

template <typename T> static void loss() {
  const char *tn = std::is_same_v<T, float> ? "fp32" : "bf16";
  auto *bad = devI({0}).release();
  for (Index vocab : {1, 5, 8, 9, 1000, 1001, 5000}) for (Index rows : {1, 3, 64}) for (int off : {0, 1}) {
    if (quick && vocab > 1001) continue;
    ctx = S("%s xent rows=%ld vocab=%ld off=%d", tn, rows, vocab, off);
    const FVec lg = rounded<T>(rnd(rows * vocab, -4, 4));
    IVec t = ids(rows, 0, vocab);
    const float lgr = 1.7f;
    float el; FVec eg(rows * vocab);
    cpu::softmaxCrossEntropy(lg.data(), t.data(), &el, rows, vocab);
    cpu::softmaxCrossEntropyGrad(&lgr, lg.data(), t.data(), eg.data(), rows, vocab);
    auto L = dev<T>(lg, off); auto Tt = devI(t); auto Lg = dev<float>({lgr});
    Buf<unsigned char> ws(gpu::softmaxCrossEntropyWorkspaceSize(rows));
    Buf<float> l(1); Buf<T> g(rows * vocab, off);
    bad->p[0] = 0;
    gpu::softmaxCrossEntropy<T>(L->p, Tt->p, l.p, rows, vocab, ws.p, bad->p, 0);
    close("xent loss", l.down(), {el}, kFp32, 0.0);
    gpu::softmaxCrossEntropyGrad<T>(Lg->p, L->p, Tt->p, g.p, rows, vocab, bad->p, 0);
    close("xent grad", g.down(), eg, rtolOf<T>(), kSmall);
    expect("xent badId clear", bad->p[0] == 0);
    if (rows == 64) {
      // Bad targets: rows add 0 to the loss, zero gradient rows.
      IVec tb = t; tb[2] = vocab; tb[10] = -1; tb[20] = INT_MIN;
      IVec vt; FVec vl;
      for (Index r = 0; r < rows; ++r) if (tb[r] >= 0 && tb[r] < vocab) { vt.push_back(tb[r]); vl.insert(vl.end(), lg.begin() + r * vocab, lg.begin() + (r + 1) * vocab); }
      float vloss; cpu::softmaxCrossEntropy(vl.data(), vt.data(), &vloss, Index(vt.size()), vocab);
      const float expL = float(double(vloss) * vt.size() / rows);
      IVec tc = tb; for (int r : {2, 10, 20}) tc[r] = 0;
      FVec egb(rows * vocab); cpu::softmaxCrossEntropyGrad(&lgr, lg.data(), tc.data(), egb.data(), rows, vocab);
      for (int r : {2, 10, 20}) std::fill_n(egb.begin() + r * vocab, vocab, 0.f);
      auto Tb = devI(tb);
      bad->p[0] = 0;
      gpu::softmaxCrossEntropy<T>(L->p, Tb->p, l.p, rows, vocab, ws.p, bad->p, 0);
      close("xent loss bad ids", l.down(), {expL}, kFp32, 0.0); expect("xent badId", bad->p[0] == 1);
      bad->p[0] = 0;
      gpu::softmaxCrossEntropyGrad<T>(Lg->p, L->p, Tb->p, g.p, rows, vocab, bad->p, 0);
      close("xent grad bad ids", g.down(), egb, rtolOf<T>(), kSmall); expect("xent grad badId", bad->p[0] == 1);
    }
  }
  ctx = S("%s xent 0 rows", tn);
  Buf<float> l(1);
  gpu::softmaxCrossEntropy<T>(nullptr, nullptr, l.p, 0, 10, nullptr, bad->p, 0);
  expect("xent NaN for 0 rows", std::isnan(l.p[0]));
  delete bad;
  noLaunchErrors();
}

template <typename T> static void vocabParallel() {
  const char *tn = std::is_same_v<T, float> ? "fp32" : "bf16";
  auto *bad = devI({0}).release();
  for (Index lv : {1, 37, 40, 1025}) for (std::int32_t shard : {0, 1, 3}) for (int off : {0, 1}) {
    const Index rows = 96, ch = 48, shards = 4;
    if (quick && lv > 40) continue;
    ctx = S("%s vp lv=%ld shard=%d off=%d", tn, lv, shard, off);
    IVec id = ids(rows, 0, int(shards * lv));
    const FVec table = rounded<T>(rnd(lv * ch)), grad = rounded<T>(rnd(rows * ch)), lg = rounded<T>(rnd(rows * lv, -4, 4));
    const float lgr = 0.9f;
    FVec emb(rows * ch), tg(lv * ch), mx(rows), tl(rows), se(rows), lgg(rows * lv); float ls;
    cpu::vocabParallelEmbedding(id.data(), table.data(), &shard, emb.data(), rows, lv, ch);
    cpu::vocabParallelEmbeddingGrad(grad.data(), id.data(), &shard, tg.data(), rows, lv, ch);
    cpu::vocabParallelMax(lg.data(), mx.data(), rows, lv);
    cpu::vocabParallelTargetLogit(lg.data(), id.data(), &shard, tl.data(), rows, lv);
    cpu::vocabParallelSumExp(lg.data(), mx.data(), se.data(), rows, lv);
    cpu::vocabParallelLoss(mx.data(), se.data(), tl.data(), &ls, rows);
    cpu::vocabParallelCrossEntropyGrad(&lgr, lg.data(), id.data(), &shard, mx.data(), se.data(), lgg.data(), rows, lv);
    auto Id = devI(id); auto Sh = devI({shard}); auto Tb = dev<T>(table, off); auto G = dev<T>(grad, off);
    auto L = dev<T>(lg, off); auto Lg = dev<float>({lgr});
    bad->p[0] = 0;
    Buf<T> e(rows * ch, off);
    gpu::vocabParallelEmbedding<T>(Id->p, Tb->p, Sh->p, e.p, rows, lv, ch, bad->p, 0); exact("vp emb", e.down(), emb);
    std::size_t wsb = gpu::vocabParallelEmbeddingGradWorkspaceSize(rows, lv, ch);
    Buf<unsigned char> ws(wsb);
    auto Tg = dev<T>(FVec(lv * ch, NAN), off);
    gpu::vocabParallelEmbeddingGrad<T>(G->p, Id->p, Sh->p, Tg->p, rows, lv, ch, ws.p, bad->p, 0);
    close("vp embGrad", Tg->down(), tg, rtolOf<T>(), kCancel);
    auto Mx = dev<float>(mx), Se = dev<float>(se), Tl = dev<float>(tl);
    Buf<float> gm(rows), gt(rows), gs(rows), gl(1); Buf<T> gg(rows * lv, off);
    gpu::vocabParallelMax<T>(L->p, gm.p, rows, lv, 0); exact("vp max", gm.down(), mx);
    gpu::vocabParallelTargetLogit<T>(L->p, Id->p, Sh->p, gt.p, rows, lv, bad->p, 0); exact("vp target", gt.down(), tl);
    gpu::vocabParallelSumExp<T>(L->p, Mx->p, gs.p, rows, lv, 0); close("vp sumExp", gs.down(), se, kFp32, kSmall);
    gpu::vocabParallelCrossEntropyGrad<T>(Lg->p, L->p, Id->p, Sh->p, Mx->p, Se->p, gg.p, rows, lv, bad->p, 0);
    close("vp grad", gg.down(), lgg, rtolOf<T>(), kSmall);
    gpu::vocabParallelLoss(Mx->p, Se->p, Tl->p, gl.p, rows, nullptr, 0); close("vp loss", gl.down(), {ls}, kFp32, 0.0);
    expect("vp badId clear", bad->p[0] == 0);
    // A padded vocabulary of pv ids: this shard's columns from pv on (half
    // of them, or all) are padding, skipped by max and sum_exp and of zero
    // gradient.
    for (Index pv : {Index(shard) * lv + (lv + 1) / 2, Index(shard) * lv}) {
      if (pv == 0) continue;
      ctx = S("%s vp padded lv=%ld shard=%d vocab=%ld off=%d", tn, lv, shard, pv, off);
      IVec idp = id;
      for (auto &t : idp) t %= std::int32_t(pv);
      FVec pm(rows), ps(rows), pg(rows * lv);
      cpu::vocabParallelMax(lg.data(), pm.data(), rows, lv, &shard, pv);
      cpu::vocabParallelSumExp(lg.data(), mx.data(), ps.data(), rows, lv, &shard, pv);
      cpu::vocabParallelCrossEntropyGrad(&lgr, lg.data(), idp.data(), &shard, mx.data(), se.data(), pg.data(), rows, lv, pv);
      auto Idp = devI(idp);
      gpu::vocabParallelMax<T>(L->p, gm.p, rows, lv, 0, Sh->p, pv); exact("vp max padded", gm.down(), pm);
      gpu::vocabParallelSumExp<T>(L->p, Mx->p, gs.p, rows, lv, 0, Sh->p, pv); close("vp sumExp padded", gs.down(), ps, kFp32, kSmall);
      gpu::vocabParallelCrossEntropyGrad<T>(Lg->p, L->p, Idp->p, Sh->p, Mx->p, Se->p, gg.p, rows, lv, bad->p, 0, pv);
      const FVec got = gg.down();
      close("vp grad padded", got, pg, rtolOf<T>(), kSmall);
      bool zero = true;
      for (Index r = 0; r < rows; ++r)
        for (Index v = std::max<Index>(0, pv - Index(shard) * lv); v < lv; ++v)
          zero = zero && got[r * lv + v] == 0.0f;
      expect("vp grad padding exactly zero", zero);
      expect("vp padded badId clear", bad->p[0] == 0);
    }
    // Negative ids and bad shards: badId, zeros, nothing out of bounds.
    IVec idb = id; idb[4] = -1; idb[50] = INT_MIN;
    auto Idb = devI(idb);
    for (std::int32_t bs : {shard, -1, INT_MAX}) {
      if (bs == INT_MAX && lv == 1) continue; // INT_MAX * 1 still fits
      ctx = S("%s vp bad lv=%ld shard=%d/%d off=%d", tn, lv, shard, bs, off);
      auto Bs = devI({bs});
      const bool shardBad = bs != shard;
      IVec idc = idb;
      for (Index r = 0; r < rows; ++r)
        if (shardBad || r == 4 || r == 50) idc[r] = (shard + 1) * int(lv); // another shard's id
      std::int32_t cs = shard;
      FVec e1(rows * ch), e2(lv * ch), e3(rows), e4(rows * lv);
      cpu::vocabParallelEmbedding(idc.data(), table.data(), &cs, e1.data(), rows, lv, ch);
      cpu::vocabParallelEmbeddingGrad(grad.data(), idc.data(), &cs, e2.data(), rows, lv, ch);
      cpu::vocabParallelTargetLogit(lg.data(), idc.data(), &cs, e3.data(), rows, lv);
      cpu::vocabParallelCrossEntropyGrad(&lgr, lg.data(), idc.data(), &cs, mx.data(), se.data(), e4.data(), rows, lv);
      for (int r : {4, 50}) std::fill_n(e4.begin() + r * lv, lv, 0.f);
      bad->p[0] = 0; gpu::vocabParallelEmbedding<T>(Idb->p, Tb->p, Bs->p, e.p, rows, lv, ch, bad->p, 0);
      exact("vp emb bad", e.down(), e1); expect("vp emb badId", bad->p[0] == 1);
      bad->p[0] = 0; gpu::vocabParallelEmbeddingGrad<T>(G->p, Idb->p, Bs->p, Tg->p, rows, lv, ch, ws.p, bad->p, 0);
      close("vp embGrad bad", Tg->down(), e2, rtolOf<T>(), kCancel); expect("vp embGrad badId", bad->p[0] == 1);
      bad->p[0] = 0; gpu::vocabParallelTargetLogit<T>(L->p, Idb->p, Bs->p, gt.p, rows, lv, bad->p, 0);
      exact("vp target bad", gt.down(), e3); expect("vp target badId", bad->p[0] == 1);
      bad->p[0] = 0; gpu::vocabParallelCrossEntropyGrad<T>(Lg->p, L->p, Idb->p, Bs->p, Mx->p, Se->p, gg.p, rows, lv, bad->p, 0);
      close("vp grad bad", gg.down(), e4, rtolOf<T>(), kSmall); expect("vp grad badId", bad->p[0] == 1);
    }
  }
  delete bad;
  noLaunchErrors();
}

static void blocks() {
  auto *bad = devI({0}).release();
  struct Sh { Index outer, bd, inner, blocks; };
  for (Sh s : {Sh{3, 5, 7, 4}, Sh{3, 5, 8, 4}, Sh{1, 6, 3, 2}, Sh{1, 1, 1, 1}, Sh{2, 1, 1, 3}, Sh{4, 3, 300, 2}, Sh{1, 1, 2, 5}})
    for (int bytes : {2, 4}) for (int off : {0, 1, 2, 3}) {
      ctx = S("blocks %ld %ld %ld %ld bytes=%d off=%d", s.outer, s.bd, s.inner, s.blocks, bytes, off);
      const Index total = s.outer * s.blocks * s.bd * s.inner, part = s.outer * s.bd * s.inner;
      FVec in = rnd(total);
      if (bytes == 2) in = rounded<bf16>(in);
      FVec es(part), ep(total), eu(total);
      std::int32_t idx = std::int32_t(s.blocks - 1);
      cpu::sliceBlock(in.data(), &idx, es.data(), s.outer, s.bd, s.inner, s.blocks);
      cpu::packBlocks(in.data(), ep.data(), s.outer, s.bd, s.inner, s.blocks);
      cpu::unpackBlocks(in.data(), eu.data(), s.outer, s.bd, s.inner, s.blocks);
      auto Ix = devI({idx}); auto Ib = devI({std::int32_t(s.blocks)}); auto In = devI({-1});
      auto run = [&](auto tag) {
        using U = decltype(tag);
        auto I = dev<U>(in, off); Buf<U> sl(part, off), pk(total, off), up(total, off);
        bad->p[0] = 0;
        gpu::sliceBlock(I->p, Ix->p, sl.p, s.outer, s.bd, s.inner, s.blocks, bytes, bad->p, 0);
        gpu::packBlocks(I->p, pk.p, s.outer, s.bd, s.inner, s.blocks, bytes, 0);
        gpu::unpackBlocks(I->p, up.p, s.outer, s.bd, s.inner, s.blocks, bytes, 0);
        exact("slice", sl.down(), es); exact("pack", pk.down(), ep); exact("unpack", up.down(), eu);
        expect("slice badId clear", bad->p[0] == 0);
        for (auto *B : {Ib.get(), In.get()}) {
          bad->p[0] = 0;
          gpu::sliceBlock(I->p, B->p, sl.p, s.outer, s.bd, s.inner, s.blocks, bytes, bad->p, 0);
          exact("slice bad index zeros", sl.down(), FVec(part, 0.f)); expect("slice badId", bad->p[0] == 1);
        }
      };
      if (bytes == 4) run(float{}); else run(bf16{});
    }
  delete bad;
  noLaunchErrors();
}

// Grid-stride loops past the 8192-block cap (flatBlocks).
static void big() {
  for (int off : {0, 1}) {
    const Index n = Index(8192) * 256 * 8 + 8 * 3 + 5 - off;
    ctx = S("big add n=%ld off=%d", n, off);
    const FVec x = rnd(n), y = rnd(n);
    FVec e(n); cpu::add(x.data(), y.data(), e.data(), n);
    auto X = dev<float>(x, off), Y = dev<float>(y, off); Buf<float> r(n, off);
    gpu::add<float>(X->p, Y->p, r.p, n, 0);
    exact("big add", r.down(), e);
  }
  const Index n = Index(8192) * 256 + 77;
  ctx = "big fillI32/addI32";
  Buf<std::int32_t> a(n), b(n);
  gpu::fillI32(a.p, 5, n, 0); gpu::fillI32(b.p, 7, n, 0); gpu::addI32(a.p, b.p, b.p, n, 0);
  bool ok = true; for (Index i = 0; i < n; ++i) ok &= a.p[i] == 5 && b.p[i] == 12;
  expect("big fill/add i32", ok);
  noLaunchErrors();
}

int main(int argc, char **argv) {
  const char *o = getenv("EMU_ORDER");
  emu::order = !o ? 0 : !strcmp(o, "rev") ? 1 : !strcmp(o, "rand") ? 2 : 0;
  const std::string only = argc > 1 ? argv[1] : "";
  auto want = [&](const char *n) { return only.empty() || only.find(n) != std::string::npos; };
  if (want("conv")) conversions();
  if (want("elem")) { elementwise<float>(); elementwise<bf16>(); }
  if (want("adamw")) adamw();
  if (want("emb")) { embeddings<float>(); embeddings<bf16>(); }
  if (want("norm")) { norms<float>(); norms<bf16>(); }
  if (want("bias")) { bias<float>(); bias<bf16>(); }
  if (want("loss")) { loss<float>(); loss<bf16>(); }
  if (want("vp")) { vocabParallel<float>(); vocabParallel<bf16>(); }
  if (want("blocks")) blocks();
  if (!only.empty() && want("big")) big();
  std::printf("order=%s checks=%ld fails=%ld launches=%ld blocks=%ld switches=%ld\n", o ? o : "fwd", checks, fails,
              emu::launches, emu::blocksRun, emu::switches);
  return fails ? 1 : 0;
}
