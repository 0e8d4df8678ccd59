#!/usr/bin/env bash
# Configures (once) and builds partition into build/ with ninja, lld and ccache.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PARTITION_BUILD_DIR:-$root/build}
llvm_prefix=$(llvm-config-22 --prefix)
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR="$llvm_prefix/lib/cmake/mlir" \
    -DLLVM_DIR="$llvm_prefix/lib/cmake/llvm"
fi
# About 1 GB of memory per compile job; two cores.
cmake --build "$build" -j "${PARTITION_JOBS:-2}"
