#!/usr/bin/env bash
# The GPU check: correctness and speed of the CUDA backend on one GPU.
#
#   bench/gpu-check.sh OUT              build, prepare and run on this machine
#                                       (it needs everything: MLIR, CUDA, GPU)
#   bench/gpu-check.sh prepare DIR      here (no GPU needed): build with CUDA,
#                                       compile the .ptp programs, collect
#                                       partition-run, the gpu-labelled test
#                                       binaries and the shared libraries a
#                                       bare GPU machine lacks into
#                                       DIR/payload.tar.xz (checked < 64 MiB)
#   bench/gpu-check.sh run DIR OUT      on the GPU machine: nothing is built;
#                                       runs everything from DIR, writes OUT
#
# With the device tool of this project: prepare into an ignored folder of the
# working tree (e.g. build-gpucheck, ~10 MiB), carry it, and run
#   bench/gpu-check.sh run build-gpucheck "$OUT"
# on the device machine (a run within its limits: BENCH_STEPS=8 and the two
# models take a few minutes; set BENCH_MODELS=gpt2-124m at prepare time for
# a shorter check).
#
# OUT (or $OUT when not given) receives: summary.md (read this first),
# results.json, tests.txt (every ctest -L gpu test: passed / failed /
# skipped, with its output in tests/), bench.txt (tokens/s and MFU of
# gpt2-124m and gpt2-1.5b training steps, fp32 and bf16; gpt2-124m again
# with "offload": {"optimizer": "host"}, AdamW on the CPU and on the GPU,
# as a step-time ratio and loss difference against the step without
# offload; and llm.c's train_gpt2cu on the same model and batch when
# LLMC_BIN names it).
#
# Environment:
#   BUILD_DIR      build directory (default: build, reused when it is
#                  already configured with CUDA; else configured Release +
#                  Ninja + CMAKE_CUDA_ARCHITECTURES=native (GPU) or 90)
#   LLMC_BIN       path of llm.c's train_gpt2cu (built by hand; optional)
#   BENCH_STEPS    training steps per benchmark run (default 8; the first
#                  2 are warm-up and not timed)
#   BENCH_MODELS   models to time (default "gpt2-124m gpt2-1.5b")
#   BENCH_BUDGET_GIB  device memory a benchmark program may plan (default
#                  120): the batch is halved from the llm.c-like default
#                  until the compiler's arena fits
#   BENCH_TF32=1   also time the fp32 programs with TF32 GEMMs
#                  (PARTITION_CUDA_TF32=1), against the TF32 peak
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/.." && pwd)"
harness="$here/gpu/harness.py"
python="${PYTHON:-python3}"

usage() {
  sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}

build() {
  local build_dir="${BUILD_DIR:-$src/build}"
  if [[ -f "$build_dir/CMakeCache.txt" ]] &&
     grep -q '^PARTITION_ENABLE_CUDA:BOOL=ON' "$build_dir/CMakeCache.txt" &&
     grep -q '^CMAKE_CUDA_COMPILER:' "$build_dir/CMakeCache.txt"; then
    echo "gpu-check: reusing $build_dir (configured with CUDA)" >&2
  else
    local arch=90
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
      arch=native
    fi
    echo "gpu-check: configuring $build_dir (Release, Ninja, CUDA arch $arch)" >&2
    cmake -S "$src" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES="$arch" >&2
  fi
  # Only what the check needs (the tree is shared: take the build lock).
  local targets=(partition-run partition-gen partition-compile partition-opt)
  local lock=(); command -v flock >/dev/null && lock=(flock /tmp/partition-build.lock)
  "${lock[@]}" cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}" >&2
  # Every binary a gpu-labelled test runs.
  local tests
  tests="$("$python" "$harness" gpu-test-targets --build "$build_dir")"
  if [[ -n "$tests" ]]; then
    # shellcheck disable=SC2086
    "${lock[@]}" cmake --build "$build_dir" -j"$(nproc)" --target $tests >&2
  fi
  echo "$build_dir"
}

case "${1:-}" in
  prepare)
    [[ $# -eq 2 ]] || usage
    build_dir="$(build)"
    exec "$python" "$harness" prepare --build "$build_dir" --src "$src" --dir "$2"
    ;;
  run)
    [[ $# -ge 2 && $# -le 3 ]] || usage
    out="${3:-${OUT:-}}"
    [[ -n "$out" ]] || usage
    exec "$python" "$harness" run --dir "$2" --out "$out" --src "$src"
    ;;
  -h|--help|"")
    if [[ -z "${1:-}" && -n "${OUT:-}" ]]; then
      set -- "$OUT"
    else
      usage
    fi
    ;&
  *)
    out="$1"
    mkdir -p "$out"
    build_dir="$(build)"
    "$python" "$harness" prepare --build "$build_dir" --src "$src" \
      --dir "$out/prepared" --no-size-limit
    exec "$python" "$harness" run --dir "$out/prepared" --out "$out" --src "$src"
    ;;
esac
