#!/usr/bin/env python3
"""A short, deterministic fuzz run of the .ptp loader (a ctest test).

  run_fuzz.py FUZZER --bin DIR [--runs N] [--seed S] [--libfuzzer]

Builds a seed corpus in a temporary directory -- real programs compiled by
DIR/partition-gen and DIR/partition-compile (gpt2-tiny; a small llama with
grouped-query attention; gpt2-tiny with two micro-batches; gpt2-tiny
without an optimizer; data-parallel ones with collectives; ZeRO-1 and
ZeRO-2 ones; gpt2-tiny with its moments offloaded to NVMe; a two-stage
pipeline with sends and receives), the inputs of fixed findings
(fuzz/corpus/program/), plus truncations of the first -- then runs FUZZER
for N mutated inputs (libFuzzer flags when --libfuzzer, else the
StandaloneFuzzDriver's). Fails if the fuzzer reports a crash, a sanitizer
error or an exception other than ProgramError; libFuzzer then leaves the
input as program-loader-crash-* in the working directory.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from fuzz_session import run_fuzzer


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"run_fuzz.py: {' '.join(command)} failed:\n"
                 f"{result.stdout}{result.stderr}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fuzzer")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--libfuzzer", action="store_true")
    args = parser.parse_args()
    gen = os.path.join(args.bin, "partition-gen")
    compile_ = os.path.join(args.bin, "partition-compile")

    with tempfile.TemporaryDirectory(prefix="ptp-fuzz-") as scratch:
        seeds = os.path.join(scratch, "seeds")
        work = os.path.join(scratch, "work")
        os.makedirs(seeds)
        os.makedirs(work)
        models = {
            "gpt2": ["--preset", "gpt2-tiny"],
            "llama": ["--preset", "llama-tiny", "--layers", "1", "--hidden",
                      "32", "--heads", "4", "--kv-heads", "2", "--vocab", "64",
                      "--seq-len", "16", "--batch", "2"],
        }
        for name, flags in models.items():
            run([gen, *flags, "-o", os.path.join(scratch, name + ".mlir")])
        variants = {
            "gpt2": ("gpt2", []),
            "llama": ("llama", []),
            "gpt2-mb2": ("gpt2", ["--microbatches", "2"]),
            "gpt2-gradients": ("gpt2", ["--optimizer", "none"]),
        }
        for name, (model, flags) in variants.items():
            run([compile_, os.path.join(scratch, model + ".mlir"), "-o",
                 os.path.join(seeds, name + ".ptp"), *flags])
        # A data-parallel program (a mesh, gradient buckets and the loss
        # all-reduced), made by hand from the llama one while the compiler's
        # own are not there; then also the compiler's, when it writes them.
        make_dp = os.path.join(args.bin, "partition-test-dp-program")
        if os.path.exists(make_dp):
            run([make_dp, os.path.join(seeds, "llama.ptp"),
                 os.path.join(seeds, "llama-dp2.ptp"), "--dp", "2",
                 "--bucket-bytes", "20000"])
        plan = os.path.join(scratch, "dp2.json")
        with open(plan, "w") as f:
            f.write('{"mesh": {"dp": 2}}')
        subprocess.run([compile_, os.path.join(scratch, "gpt2.mlir"), "-o",
                        os.path.join(seeds, "gpt2-dp2.ptp"), "--plan", plan],
                       capture_output=True)
        # ZeRO-1 and ZeRO-2 (each rank's flat chunk of a parameter, per-
        # tensor reduce-scatters and all-gathers, adamw_block).
        for stage in (1, 2):
            plan = os.path.join(scratch, f"zero{stage}.json")
            with open(plan, "w") as f:
                f.write('{"mesh": {"dp": 2}, "zero": {"stage": %d}}' % stage)
            run([compile_, os.path.join(scratch, "gpt2.mlir"), "-o",
                 os.path.join(seeds, f"gpt2-zero{stage}.ptp"), "--plan", plan])
        # Inputs of fixed findings (fuzz/corpus/program/): each must now be
        # refused cleanly, or load.
        corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "corpus", "program")
        for name in sorted(os.listdir(corpus)):
            shutil.copy(os.path.join(corpus, name), seeds)
        # The offload (schema v12: moments in an NVMe tier, sliced tier
        # copies started and waited for).
        plan = os.path.join(scratch, "offload.json")
        with open(plan, "w") as f:
            f.write('{"offload": {"optimizer": "nvme", "path": "/tmp", '
                    '"buffer_bytes": 98304}}')
        run([compile_, os.path.join(scratch, "gpt2.mlir"), "-o",
             os.path.join(seeds, "gpt2-offload.ptp"), "--plan", plan])
        # Nonuniform replicas (schema v7: a whole program nested per
        # replica, tp 2 and tp 1).
        plan = os.path.join(scratch, "ntp.json")
        with open(plan, "w") as f:
            f.write('{"replicas": [{"tp": 2}, {"tp": 1}]}')
        subprocess.run([compile_, os.path.join(scratch, "gpt2.mlir"), "-o",
                        os.path.join(seeds, "gpt2-ntp.ptp"), "--plan", plan],
                       capture_output=True)
        # A two-stage pipeline program (schema v5: a stream per stage,
        # sends and receives), from the hand-written stage module of the
        # pipeline tests.
        stages = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "..", "test", "e2e", "Inputs",
                              "pipeline-tiny-pp2.mlir")
        planned = os.path.join(scratch, "pp2-planned.mlir")
        run([os.path.join(args.bin, "partition-opt"), stages, "--lower-to-rt",
             "--lower-memory-plan", "-o", planned])
        run([os.path.join(args.bin, "partition-translate"), "--rt-to-program",
             planned, "-o", os.path.join(seeds, "tiny-pp2.ptp")])
        # Action walks (schema v15): regions, slots with views, rows and
        # actions; and (v16) GPipe's repeated slot with its strides, from
        # the program writer's tests.
        for name in ("program_writer_walk", "program_writer_walk_repeated"):
            walk = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "test", "Lowering", name + ".mlir")
            planned = os.path.join(scratch, name + "-planned.mlir")
            run([os.path.join(args.bin, "partition-opt"), walk,
                 "--lower-memory-plan", "-o", planned])
            run([os.path.join(args.bin, "partition-translate"),
                 "--rt-to-program", planned,
                 "-o", os.path.join(seeds, name + ".ptp")])
        program = open(os.path.join(seeds, "gpt2.ptp"), "rb").read()
        for fraction in (0.0005, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
            keep = max(1, int(len(program) * fraction))
            with open(os.path.join(seeds, f"gpt2-truncated-{keep}.ptp"),
                      "wb") as f:
                f.write(program[:keep])

        if args.libfuzzer:
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}", "-rss_limit_mb=2048",
                       "-timeout=60", "-print_final_stats=1",
                       f"-artifact_prefix={os.getcwd()}/program-loader-", work, seeds]
        else:
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}", seeds]
        run_fuzzer("run_fuzz.py", command)


if __name__ == "__main__":
    main()
