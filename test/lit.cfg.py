# -*- Python -*-
import os
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "PARTITION"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.partition_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.partition_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["partition-opt", "partition-gen", "partition-translate", "partition-compile",
     "partition-run", "partition-schedule", "partition-export",
     "partition-import", "partition-plan"],
    tool_dirs)
# Helper scripts (test/*/Inputs/*.py) run with the interpreter running lit.
config.substitutions.append(("%python", '"' + sys.executable + '"'))
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.partition_tools_dir, append_path=True)
# These tests check the CPU backend, the reference (correctness is defined
# on CPU ranks): hide GPUs so that partition-run --backend auto means the
# same on every machine. The CUDA backend has its own tests (ctest -L gpu).
config.environment["CUDA_VISIBLE_DEVICES"] = ""
# MPI start-up, which the suite pays hundreds of times:
# - OpenMPI's point-to-point layer ob1 over shared memory (the btl set for
#   test/e2e/ranks and by partition-run's harnesses). Left to choose, it
#   starts UCX first: 0.51 against 0.31 s for a 2-rank gpt2-tiny step.
# - No PCI scan by hwloc in mpirun and every rank (no network is used):
#   a 4-rank gpt2-tiny run of 20 steps takes 0.48 s of CPU against 0.58-0.69.
config.environment["OMPI_MCA_pml"] = "ob1"
config.environment["HWLOC_COMPONENTS"] = "-pci,-linuxio"
# Every mpirun of the suite (the tests' own and partition-run --nproc's)
# gives its job a TMPDIR of its own. OpenMPI 4 (Debian 12's 4.1.4) makes a
# per-node session directory, ompi.<host>.<uid>, under TMPDIR when a job
# starts and removes it when the job ends; lit gives every test one TMPDIR
# (its lit-tmp-*), so two tests' jobs starting and ending at once race on
# that directory: "A call to mkdir was unable to create the desired
# directory ... File exists", then orte_init fails (seen in a full ctest
# -j2 run, on test/e2e/ranks/offload-parameters.test). The wrapper makes
# each job's directory under lit's, which lit removes at the end, and then
# is the real mpirun (exec: signals, `timeout` included, reach it).
import shutil
_wrapper_dir = os.path.join(config.test_exec_root, "mpirun-per-job-tmpdir")
# The real one: never the wrapper itself (it would exec itself forever).
_real_mpirun = shutil.which("mpirun", path=os.pathsep.join(
    p for p in config.environment.get("PATH", "").split(os.pathsep)
    if os.path.normpath(p) != os.path.normpath(_wrapper_dir)))
if _real_mpirun:
    os.makedirs(_wrapper_dir, exist_ok=True)
    _wrapper = os.path.join(_wrapper_dir, "mpirun")
    _text = ("#!/bin/sh\n"
             "# Written by test/lit.cfg.py: each MPI job gets a TMPDIR of "
             "its own (why: there).\n"
             'TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/mpirun.XXXXXX") || exit 1\n'
             "export TMPDIR\n"
             'exec "%s" "$@"\n' % _real_mpirun)
    _old = None
    if os.path.exists(_wrapper):
        with open(_wrapper) as f:
            _old = f.read()
    if _old != _text:
        with open(_wrapper, "w") as f:
            f.write(_text)
    os.chmod(_wrapper, 0o755)
    llvm_config.with_environment("PATH", _wrapper_dir, append_path=True)
# Optional Python packages (never dependencies of partition): a test that
# needs one says `REQUIRES: numpy` / `REQUIRES: tokenizers` and is reported
# UNSUPPORTED where %python lacks it.
import importlib.util
for module in ("numpy", "tokenizers"):
    if importlib.util.find_spec(module) is not None:
        config.available_features.add(module)
# oneDNN built in: the bf16 GEMMs can run on it (runtime/backend/cpu/Bf16Gemm.h).
if getattr(config, "partition_have_onednn", False):
    config.available_features.add("onednn")
# The CPU's vector units, for the tests of the OpenBLAS kernel choice
# (test/e2e/blas-core*.test): "cpu-avx2-fma" where Haswell kernels can run.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        cpu_flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                          if line.startswith("flags")), [])
except OSError:
    cpu_flags = []
if "avx2" in cpu_flags and "fma" in cpu_flags:
    config.available_features.add("cpu-avx2-fma")
# Where oneDNN has bf16 matmuls (its avx512_core: AVX-512 F, BW, VL, DQ).
if all(f in cpu_flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq")):
    config.available_features.add("cpu-avx512-core")
