#!/usr/bin/env python3
"""runtime-cuda-e2e: the CUDA backend against the CPU backend, end to end.

Trains gpt2-tiny and mixtral-tiny for 20 steps from the same .ptp, seed and data on both
backends and compares the loss of every step (and the final eval loss):

  fp32 program: CUDA vs CPU, relative difference <= 1e-4 per step (cuBLASLt
                runs fp32 GEMMs with CUBLAS_COMPUTE_32F, no TF32);
  bf16 program (plan {"precision": "bf16"}): CUDA vs the fp32 program on the
                CPU, relative difference <= 2e-2 per step (bf16 activations
                carry 8 bits of mantissa; the curves must still agree to
                about 2%), and, where the CPU backend runs bf16 programs,
                CUDA vs CPU on the bf16 program to the same 2e-2.

  MoE program (mixtral-tiny, fp32): CUDA vs CPU, the losses to 1e-4 per step
                and the routing metrics (expert load min / max / mean and
                the dropped fraction, counted on the device) to 1e-2: a
                near-tie may route one token differently.
  offload (gpt2-tiny fp32, plan offload with a 98304-byte buffer, so that
                the updates are sliced and read ahead; docs/offload.md),
                each against the same program without offload on CUDA:
                  optimizer "host" and "nvme" with the update on the GPU
                  (PARTITION_OFFLOAD_UPDATE=gpu: the same kernel on the
                  staged slices): every loss bit-identical;
                  optimizer "host" and "nvme" with AdamW on the CPU (the
                  default: the CPU backend's kernel, the GPU's formula op
                  for op; FMA contraction may differ in the last bit):
                  relative difference <= 1e-5 per step;
                and ZeRO-3's parameter offload (dp 2 ZeRO-3 on 2 ranks
                under mpirun, the shards in host memory, the moments on
                NVMe) against the same plan without offload: the update on
                the GPU bit-identical, on the CPU within 1e-5; two GPUs
                needed, else a note.
  MoE program with expert parallelism (mixtral-tiny, fp32, mesh dp 2,
                moe.expert_parallel 2), 2 ranks under mpirun: its counted
                all-to-alls (only the filled rows move; NCCL on CUDA,
                MPI_Ialltoallv on CPU). CUDA vs CPU as above, and the bytes
                exchanged per step (moe_all_to_all_bytes) to 1e-2. NCCL
                needs one GPU per rank: on a machine with one GPU, or
                without mpirun, this case prints a note and is not run.

Without a usable GPU (or a build without the CUDA backend) it prints
"runtime-cuda-e2e: skipped: REASON" and exits 0; ctest reports it skipped.

  cuda_e2e.py --bin DIR [--ptp-dir DIR] --workdir DIR

--bin holds partition-run (and partition-gen / partition-compile, needed
unless --ptp-dir already holds gpt2-tiny-fp32.ptp, gpt2-tiny-bf16.ptp,
gpt2-tiny-fp32-{offhost,offnvme,z3,z3off}.ptp,
mixtral-tiny-fp32.ptp and mixtral-tiny-fp32-ep2.ptp, as bench/gpu-check.sh
prepare leaves them for machines without MLIR).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

STEPS = 20
FP32_TOLERANCE = 1e-4
# The CPU's AdamW against the GPU's: the same formula, rounding apart.
OFFLOAD_CPU_UPDATE_TOLERANCE = 1e-5
OFFLOAD_BUFFER = 98304
BF16_TOLERANCE = 2e-2
NAME = "runtime-cuda-e2e"
# Expert parallelism over 2 ranks: the MoE layers' token exchanges are
# counted all-to-alls (docs/moe.md).
EP2_PLAN = {"mesh": {"dp": 2}, "moe": {"expert_parallel": 2}}
EP2_RANKS = 2
# Optimizer offload; the nvme tier's directory is given at run time
# (--offload-path), so a program compiled elsewhere runs here. "z3" is the
# reference of "z3off" (ZeRO-3's parameter offload on 2 ranks).
ZERO3_PLAN = {"mesh": {"dp": 2}, "zero": {"stage": 3}}
OFFLOAD_PLANS = {
    "offhost": {"offload": {"optimizer": "host",
                            "buffer_bytes": OFFLOAD_BUFFER}},
    "offnvme": {"offload": {"optimizer": "nvme", "path": "/tmp",
                            "buffer_bytes": OFFLOAD_BUFFER}},
    "z3": ZERO3_PLAN,
    "z3off": dict(ZERO3_PLAN, offload={
        "optimizer": "nvme", "parameters": "host", "path": "/tmp",
        "buffer_bytes": OFFLOAD_BUFFER}),
}


def run(command, **kwargs):
    return subprocess.run(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kwargs)


def skip(reason):
    print(f"{NAME}: skipped: {reason}")
    sys.exit(0)


def compile_programs(args):
    """{tag: path of the .ptp} (fp32, bf16, moe, moe-ep2), compiled unless
    given."""
    programs = {}
    os.makedirs(args.workdir, exist_ok=True)
    for model, precision, tag, extra in (
            ("gpt2-tiny", "fp32", "fp32", None),
            ("gpt2-tiny", "bf16", "bf16", None),
            ("mixtral-tiny", "fp32", "moe", None),
            ("mixtral-tiny", "fp32", "moe-ep2", EP2_PLAN),
            ("gpt2-tiny", "fp32", "offhost", OFFLOAD_PLANS["offhost"]),
            ("gpt2-tiny", "fp32", "offnvme", OFFLOAD_PLANS["offnvme"]),
            ("gpt2-tiny", "fp32", "z3", OFFLOAD_PLANS["z3"]),
            ("gpt2-tiny", "fp32", "z3off", OFFLOAD_PLANS["z3off"])):
        suffix = "-ep2" if tag == "moe-ep2" else (
            f"-{tag}" if tag in OFFLOAD_PLANS else "")
        name = f"{model}-{precision}{suffix}.ptp"
        if args.ptp_dir and os.path.exists(os.path.join(args.ptp_dir, name)):
            programs[tag] = os.path.join(args.ptp_dir, name)
            continue
        gen = os.path.join(args.bin, "partition-gen")
        compile_ = os.path.join(args.bin, "partition-compile")
        if not (os.path.exists(gen) and os.path.exists(compile_)):
            sys.exit(f"error: no {name} in --ptp-dir and no partition-gen / "
                     f"partition-compile in {args.bin}")
        mlir = os.path.join(args.workdir, f"{model}.mlir")
        if not os.path.exists(mlir):
            result = run([gen, "--preset", model, "-o", mlir])
            if result.returncode:
                sys.exit(result.stdout)
        plan = os.path.join(args.workdir, f"plan-{precision}{suffix}.json")
        with open(plan, "w") as f:
            json.dump(dict(extra or {}, precision=precision), f)
        path = os.path.join(args.workdir, name)
        result = run([compile_, mlir, "-o", path, "--plan", plan])
        if result.returncode:
            if tag in OFFLOAD_PLANS:
                sys.exit(f"error: the offload program {name} does not "
                         f"compile:\n{result.stdout}")
            if tag == "bf16":
                print(f"note: the bf16 program does not compile "
                      f"({result.stdout.strip()}); comparing fp32 only")
                continue
            if tag == "moe-ep2":
                print(f"note: the expert-parallel program does not compile "
                      f"({result.stdout.strip()}); not comparing it")
                continue
            sys.exit(result.stdout)
        programs[tag] = path
    return programs


def train(args, program, backend, tag, launcher=None, failed=None,
          extra_args=None, extra_env=None):
    """{step: loss, "eval": eval loss, ("routing", step): ...,
    ("bytes", step): moe_all_to_all_bytes}; None when the run fails (its
    output in failed[0] when failed is a list). launcher: the mpirun
    command line that starts the ranks, if any."""
    metrics = os.path.join(args.workdir, f"{tag}.{backend}.jsonl")
    command = (launcher or []) + [
        os.path.join(args.bin, "partition-run"), program,
        "--steps", str(STEPS), "--lr", "3e-3", "--seed", "7",
        "--eval-every", str(STEPS), "--backend", backend,
        "--metrics-out", metrics] + (extra_args or [])
    env = dict(os.environ)
    env.update(extra_env or {})
    if launcher:
        # Open MPI refuses root without these (the comm tests set them too).
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    result = run(command, env=env)
    print(f"$ {' '.join(command)}\n{result.stdout.rstrip()}")
    if result.returncode:
        if failed is not None:
            failed.append(result.stdout)
        return None
    losses = {}
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if record.get("summary"):
                continue
            losses[record["step"]] = record["loss"]
            if "eval_loss" in record:
                losses["eval"] = record["eval_loss"]
            if "moe_expert_tokens" in record:
                load = record["moe_expert_tokens"]
                losses[("routing", record["step"])] = (
                    load["min"], load["max"], load["mean"],
                    record["moe_dropped_fraction"])
            if "moe_all_to_all_bytes" in record:
                losses[("bytes", record["step"])] = (
                    record["moe_all_to_all_bytes"],)
    return losses


def compare_routing(reference, candidate, what, key="routing",
                    title="routing metrics"):
    """The routing metrics (key "routing") or the bytes the all-to-alls
    exchanged (key "bytes") of every step, 1e-2 relative (a near-tie may
    send one token elsewhere); missing on either side fails."""
    worst = 0.0
    for step in range(1, STEPS + 1):
        a, b = reference.get((key, step)), candidate.get((key, step))
        if a is None or b is None:
            print(f"{what}: step {step}: {title} missing "
                  f"({'cpu' if a is None else 'cuda'})")
            return False
        for x, y in zip(a, b):
            worst = max(worst, abs(x - y) / max(abs(x), 1e-2))
    ok = worst <= 1e-2
    print(f"{what}: {title} max relative difference {worst:.2e}: "
          f"{'OK' if ok else 'FAILED'}")
    return ok


def compare_expert_parallel(args, program):
    """mixtral-tiny with expert parallelism on 2 ranks, CUDA vs CPU: the
    counted all-to-alls. True when it agrees or cannot run here (a note
    says why), False when it disagrees; exits when the CPU run fails."""
    mpiexec = shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpiexec:
        print("note: no mpirun here: the expert-parallel program (counted "
              "all-to-alls) was not run")
        return True
    launcher = [mpiexec, "-n", str(EP2_RANKS)]
    failed = []
    gpu = train(args, program, "cuda", "moe-ep2", launcher, failed)
    if gpu is None:
        if "CUDA device(s)" in failed[0]:
            # NCCL needs a device per rank (docs/cuda.md).
            print(f"note: the expert-parallel program (counted all-to-alls) "
                  f"needs {EP2_RANKS} GPUs; not run: "
                  f"{failed[0].strip().splitlines()[-1]}")
            return True
        sys.exit("error: the expert-parallel run on CUDA failed")
    cpu = train(args, program, "cpu", "moe-ep2", launcher)
    if cpu is None:
        sys.exit("error: the expert-parallel run on the CPU failed")
    what = "moe ep 2 cuda vs cpu"
    ok = compare(cpu, gpu, FP32_TOLERANCE, what)
    ok &= compare_routing(cpu, gpu, what)
    ok &= compare_routing(cpu, gpu, what, "bytes", "all-to-all bytes")
    return ok


def compare_offload(args, programs, reference):
    """The offload programs on CUDA against the program without offload on
    CUDA (reference)."""
    ok = True
    directory = os.path.join(args.workdir, "offload")
    os.makedirs(directory, exist_ok=True)
    for tag, env, tolerance, what in (
            ("offhost", {"PARTITION_OFFLOAD_UPDATE": "gpu"}, 0.0,
             "offload host (AdamW on the GPU) vs no offload, cuda"),
            ("offnvme", {"PARTITION_OFFLOAD_UPDATE": "gpu"}, 0.0,
             "offload nvme (AdamW on the GPU) vs no offload, cuda"),
            ("offhost", {"PARTITION_OFFLOAD_UPDATE": "cpu"},
             OFFLOAD_CPU_UPDATE_TOLERANCE,
             "offload host (AdamW on the CPU) vs no offload, cuda"),
            ("offnvme", {"PARTITION_OFFLOAD_UPDATE": "cpu"},
             OFFLOAD_CPU_UPDATE_TOLERANCE,
             "offload nvme (AdamW on the CPU) vs no offload, cuda")):
        losses = train(args, programs[tag], "cuda",
                       f"{tag}-{env['PARTITION_OFFLOAD_UPDATE']}",
                       extra_args=["--offload-path", directory],
                       extra_env=env)
        if losses is None:
            print(f"{what}: the run failed")
            ok = False
            continue
        ok &= compare(reference, losses, tolerance, what)
        leftover = [f for f in os.listdir(directory)
                    if f.startswith("partition-offload-")]
        if leftover:
            print(f"{what}: offload files left behind: {leftover}")
            ok = False
    return ok & compare_parameter_offload(args, programs, directory)


def compare_parameter_offload(args, programs, directory):
    """ZeRO-3's parameter offload on 2 ranks against the same plan without
    offload, both on CUDA. True when it agrees or cannot run here (a note
    says why)."""
    mpiexec = shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpiexec:
        print("note: no mpirun here: ZeRO-3's parameter offload was not run")
        return True
    launcher = [mpiexec, "-n", "2"]
    failed = []
    reference = train(args, programs["z3"], "cuda", "z3", launcher, failed)
    if reference is None:
        if "CUDA device(s)" in failed[0]:
            print(f"note: ZeRO-3's parameter offload needs 2 GPUs; not run: "
                  f"{failed[0].strip().splitlines()[-1]}")
            return True
        sys.exit("error: the dp2 ZeRO-3 run on CUDA failed")
    ok = True
    for update, tolerance in (("gpu", 0.0),
                              ("cpu", OFFLOAD_CPU_UPDATE_TOLERANCE)):
        what = (f"dp2 ZeRO-3, parameters host and moments nvme (AdamW on "
                f"the {update.upper()}) vs no offload, cuda")
        losses = train(args, programs["z3off"], "cuda", f"z3off-{update}",
                       launcher, extra_args=["--offload-path", directory],
                       extra_env={"PARTITION_OFFLOAD_UPDATE": update})
        if losses is None:
            print(f"{what}: the run failed")
            ok = False
            continue
        ok &= compare(reference, losses, tolerance, what)
    return ok


def compare(reference, candidate, tolerance, what):
    worst = 0.0
    ok = True
    for key in list(range(1, STEPS + 1)) + ["eval"]:
        if key not in reference or key not in candidate:
            print(f"{what}: step {key} missing")
            return False
        a, b = reference[key], candidate[key]
        rel = abs(a - b) / max(abs(a), 1e-12)
        worst = max(worst, rel)
        if rel > tolerance:
            print(f"{what}: step {key}: loss {a:.7f} vs {b:.7f}, relative "
                  f"difference {rel:.2e} > {tolerance:g}")
            ok = False
    print(f"{what}: max relative difference {worst:.2e} over {STEPS} steps "
          f"and the eval loss (tolerance {tolerance:g}): "
          f"{'OK' if ok else 'FAILED'}")
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--ptp-dir")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()

    programs = compile_programs(args)
    # Does this binary and machine have the CUDA backend and a GPU?
    probe = run([os.path.join(args.bin, "partition-run"), programs["fp32"],
                 "--steps", "1", "--eval-every", "0", "--backend", "cuda",
                 "--quiet"])
    if probe.returncode:
        text = probe.stdout.strip()
        if "no usable CUDA device" in text or "without the CUDA backend" in text:
            skip(text.splitlines()[-1])
        sys.exit(f"error: partition-run --backend cuda failed:\n{text}")

    ok = True
    cpu32 = train(args, programs["fp32"], "cpu", "fp32")
    gpu32 = train(args, programs["fp32"], "cuda", "fp32")
    if cpu32 is None or gpu32 is None:
        sys.exit("error: a fp32 run failed")
    ok &= compare(cpu32, gpu32, FP32_TOLERANCE, "fp32 cuda vs cpu")
    ok &= compare_offload(args, programs, gpu32)
    if "bf16" in programs:
        gpu16 = train(args, programs["bf16"], "cuda", "bf16")
        if gpu16 is None:
            sys.exit("error: the bf16 run on CUDA failed")
        ok &= compare(cpu32, gpu16, BF16_TOLERANCE,
                      "bf16 cuda vs fp32 cpu")
        cpu16 = train(args, programs["bf16"], "cpu", "bf16")
        if cpu16 is not None:
            ok &= compare(cpu16, gpu16, BF16_TOLERANCE, "bf16 cuda vs bf16 cpu")
        else:
            print("note: the CPU backend does not run the bf16 program")
    cpuMoe = train(args, programs["moe"], "cpu", "moe")
    gpuMoe = train(args, programs["moe"], "cuda", "moe")
    if cpuMoe is None or gpuMoe is None:
        sys.exit("error: a mixture-of-experts run failed")
    ok &= compare(cpuMoe, gpuMoe, FP32_TOLERANCE, "moe cuda vs cpu")
    ok &= compare_routing(cpuMoe, gpuMoe, "moe cuda vs cpu")
    if "moe-ep2" in programs:
        ok &= compare_expert_parallel(args, programs["moe-ep2"])
    if not ok:
        sys.exit(1)
    print(f"{NAME}: OK")


if __name__ == "__main__":
    main()
