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

Without a usable GPU (or a build without the CUDA backend) it prints
"runtime-cuda-e2e: skipped: REASON" and exits 0; ctest reports it skipped.

  cuda_e2e.py --bin DIR [--ptp-dir DIR] --workdir DIR

--bin holds partition-run (and partition-gen / partition-compile, needed
unless --ptp-dir already holds gpt2-tiny-fp32.ptp, gpt2-tiny-bf16.ptp and mixtral-tiny-fp32.ptp, as
bench/gpu-check.sh prepare leaves them for machines without MLIR).
"""

import argparse
import json
import os
import subprocess
import sys

STEPS = 20
FP32_TOLERANCE = 1e-4
BF16_TOLERANCE = 2e-2
NAME = "runtime-cuda-e2e"


def run(command, **kwargs):
    return subprocess.run(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kwargs)


def skip(reason):
    print(f"{NAME}: skipped: {reason}")
    sys.exit(0)


def compile_programs(args):
    """{tag: path of the .ptp} (fp32, bf16, moe), compiled unless given."""
    programs = {}
    os.makedirs(args.workdir, exist_ok=True)
    for model, precision, tag in (("gpt2-tiny", "fp32", "fp32"),
                                  ("gpt2-tiny", "bf16", "bf16"),
                                  ("mixtral-tiny", "fp32", "moe")):
        name = f"{model}-{precision}.ptp"
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
        plan = os.path.join(args.workdir, f"plan-{precision}.json")
        with open(plan, "w") as f:
            json.dump({"precision": precision}, f)
        path = os.path.join(args.workdir, name)
        result = run([compile_, mlir, "-o", path, "--plan", plan])
        if result.returncode:
            if tag == "bf16":
                print(f"note: the bf16 program does not compile "
                      f"({result.stdout.strip()}); comparing fp32 only")
                continue
            sys.exit(result.stdout)
        programs[tag] = path
    return programs


def train(args, program, backend, tag):
    metrics = os.path.join(args.workdir, f"{tag}.{backend}.jsonl")
    command = [os.path.join(args.bin, "partition-run"), program,
               "--steps", str(STEPS), "--lr", "3e-3", "--seed", "7",
               "--eval-every", str(STEPS), "--backend", backend,
               "--metrics-out", metrics]
    result = run(command)
    print(f"$ {' '.join(command)}\n{result.stdout.rstrip()}")
    if result.returncode:
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
    return losses


def compare_routing(reference, candidate, what):
    """The routing metrics of every step, 1e-2 relative (a near-tie may
    send one token elsewhere); missing on either side fails."""
    worst = 0.0
    for step in range(1, STEPS + 1):
        a, b = reference.get(("routing", step)), candidate.get(("routing", step))
        if a is None or b is None:
            print(f"{what}: step {step}: routing metrics missing "
                  f"({'cpu' if a is None else 'cuda'})")
            return False
        for x, y in zip(a, b):
            worst = max(worst, abs(x - y) / max(abs(x), 1e-2))
    ok = worst <= 1e-2
    print(f"{what}: routing metrics max relative difference {worst:.2e}: "
          f"{'OK' if ok else 'FAILED'}")
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
    if not ok:
        sys.exit(1)
    print(f"{NAME}: OK")


if __name__ == "__main__":
    main()
