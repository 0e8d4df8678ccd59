#!/usr/bin/env bash
# Installs the Debian 12 packages partition needs; skips what is present.
set -euo pipefail

packages=(
  cmake ninja-build g++ lld ccache python3
  python3-numpy  # lit's interpreter reads .npy / .npz in the token and logits tests
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools  # MLIR, FileCheck, lit
  libgtest-dev libopenblas-openmp-dev libflatbuffers-dev flatbuffers-compiler nlohmann-json3-dev
  libdnnl-dev  # oneDNN: bf16 GEMMs on AMX (runtime/backend/cpu/Bf16Gemm.h; optional: without it they widen to fp32)
  ocl-icd-opencl-dev  # OpenCL headers: Debian's oneDNN CMake package requires them (only recommended by libdnnl-dev)
  liburing-dev  # io_uring for the offload's NVMe tier (runtime/offload)
  openmpi-bin libopenmpi-dev  # MPI: runtime/comm and its tests (skipped without it)
  clang libclang-rt-dev  # libFuzzer for fuzz/ (optional: without it only the replay driver runs)
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
    grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
