#!/usr/bin/env python3
"""A short, deterministic fuzz run of the safetensors checkpoint reader.

  run_safetensors_fuzz.py FUZZER --bin DIR [--runs N] [--seed S]
                          [--libfuzzer] [--max-total-time SECONDS]
                          [--corpus DIR]

Builds a seed corpus in a temporary directory -- checkpoints that
DIR/partition-run writes after one step of tiny models compiled by
DIR/partition-gen and DIR/partition-compile under several plans (one device;
tp2 on two ranks; dp2 on two ranks; a llama with grouped-query
attention in bf16), a version-1 copy (no checksums), a header-only file --
adds the regression inputs kept in corpus/safetensors/ beside this script
(the input of each fixed finding; none so far),
then runs FUZZER for N inputs (libFuzzer flags when --libfuzzer, else the
StandaloneFuzzDriver's). Fails if the fuzzer reports a crash, a sanitizer
error, an exception other than CheckpointError or a single allocation over
64 MB; libFuzzer then leaves the input as safetensors-crash-* in the working
directory: fix the bug and add the input to corpus/safetensors/.

A campaign: --libfuzzer --runs -1 --max-total-time 600 --corpus DIR (DIR
keeps what libFuzzer finds, for the next campaign).
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from fuzz_session import run_fuzzer

HERE = os.path.dirname(os.path.abspath(__file__))
KEPT = os.path.join(HERE, "corpus", "safetensors")
DICTIONARY = os.path.join(HERE, "safetensors.dict")

# A model small enough that a checkpoint is a few KB: libFuzzer mutates the
# header, most of the file, at a good rate.
GPT2 = ["--preset", "gpt2-tiny", "--layers", "1", "--hidden", "8",
        "--heads", "2", "--ffn", "16", "--vocab", "16", "--seq-len", "4",
        "--positions", "4", "--batch", "2"]
LLAMA = ["--preset", "llama-tiny", "--layers", "1", "--hidden", "8",
         "--heads", "2", "--kv-heads", "1", "--ffn", "16", "--vocab", "16",
         "--seq-len", "4", "--batch", "2"]
PLANS = {
    # name: (model, plan.json or None, ranks)
    "gpt2": (GPT2, None, 1),
    "gpt2-tp2": (GPT2, {"mesh": {"tp": 2}}, 2),
    "gpt2-dp2": (GPT2, {"mesh": {"dp": 2}}, 2),
    "llama-bf16": (LLAMA, {"precision": "bf16"}, 1),
}


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True, env=env,
                            timeout=300)
    if result.returncode != 0:
        sys.exit(f"run_safetensors_fuzz.py: {' '.join(command)} failed:\n"
                 f"{result.stdout}{result.stderr}")


def write_checkpoints(bin_dir, scratch, seeds):
    gen = os.path.join(bin_dir, "partition-gen")
    compile_ = os.path.join(bin_dir, "partition-compile")
    partition_run = os.path.join(bin_dir, "partition-run")
    env = dict(os.environ)
    for name, value in {"OMPI_ALLOW_RUN_AS_ROOT": "1",
                        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                        "OMPI_MCA_btl": "self,vader",
                        "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
                        "OMP_NUM_THREADS": "1"}.items():
        env.setdefault(name, value)
    for name, (model, plan, ranks) in PLANS.items():
        mlir = os.path.join(scratch, name + ".mlir")
        ptp = os.path.join(scratch, name + ".ptp")
        run([gen, *model, "-o", mlir])
        command = [compile_, mlir, "-o", ptp]
        if plan:
            plan_file = os.path.join(scratch, name + ".json")
            with open(plan_file, "w") as f:
                json.dump(plan, f)
            command += ["--plan", plan_file]
        run(command)
        ckpt = os.path.join(scratch, name + "-ckpt")
        command = [partition_run, ptp, "--steps", "1", "--eval-every", "0",
                   "--save", ckpt, "--quiet"]
        if ranks > 1:
            command += ["--nproc", str(ranks)]
        run(command, env)
        shutil.copy(os.path.join(ckpt, "checkpoint.safetensors"),
                    os.path.join(seeds, name + ".safetensors"))


def read(path):
    raw = open(path, "rb").read()
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + length]), raw[8 + length:]


def write(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def write_variants(seeds):
    """Seeds of the other shapes the reader must handle."""
    header, data = read(os.path.join(seeds, "gpt2.safetensors"))
    # Version 1: no checksums.
    metadata = dict(header["__metadata__"])
    for key in [k for k in metadata if k.startswith("crc32c:")]:
        del metadata[key]
    metadata["checkpoint_version"] = "1"
    write(os.path.join(seeds, "gpt2-v1.safetensors"),
          {**header, "__metadata__": metadata}, data)
    # Metadata and no tensor; no metadata and one tensor.
    write(os.path.join(seeds, "metadata-only.safetensors"),
          {"__metadata__": {"checkpoint_version": "2", "step": "0",
                            "data_position": "0", "seed": "0"}}, b"")
    write(os.path.join(seeds, "one-tensor.safetensors"),
          {"x": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}},
          b"\x80\x3f\x00\x40")
    # The shapes of damage the reader must refuse without allocating or
    # reading out of bounds: a header length far beyond the file; a shape
    # whose byte count overflows 64 bits; overlapping and out-of-order
    # offsets; a checksum that does not match; a large metadata value.
    with open(os.path.join(seeds, "huge-header-length.safetensors"),
              "wb") as f:
        f.write(struct.pack("<Q", 1 << 62) + b'{"__metadata__":{}}')
    # Under the format's 100 MB limit, still beyond the file: allocating it
    # before comparing with the file size trips -malloc_limit_mb.
    with open(os.path.join(seeds, "large-header-length.safetensors"),
              "wb") as f:
        f.write(struct.pack("<Q", 90_000_000) + b'{"__metadata__":{}}   ')
    write(os.path.join(seeds, "overflowing-shape.safetensors"),
          {"x": {"dtype": "F64", "shape": [1 << 61, 16],
                 "data_offsets": [0, 8]}}, b"\0" * 8)
    write(os.path.join(seeds, "overlapping.safetensors"),
          {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
          b"\0" * 12)
    write(os.path.join(seeds, "out-of-order.safetensors"),
          {"__metadata__": metadata,
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
           "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
          b"\0" * 8)
    bad = dict(header["__metadata__"])
    bad["crc32c:wte"] = "0badc0de"
    bad["note"] = "x" * 4000
    write(os.path.join(seeds, "bad-checksum.safetensors"),
          {**header, "__metadata__": bad}, data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fuzzer")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--libfuzzer", action="store_true")
    parser.add_argument("--max-total-time", type=int, default=0)
    parser.add_argument("--corpus", help="a directory that keeps what "
                        "libFuzzer finds (default: a temporary one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="safetensors-fuzz-") as scratch:
        seeds = os.path.join(scratch, "seeds")
        os.makedirs(seeds)
        write_checkpoints(args.bin, scratch, seeds)
        write_variants(seeds)
        inputs = [seeds] + ([KEPT] if os.path.isdir(KEPT) else [])

        if args.libfuzzer:
            work = args.corpus or os.path.join(scratch, "work")
            os.makedirs(work, exist_ok=True)
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}", "-rss_limit_mb=2048",
                       "-malloc_limit_mb=64", "-timeout=30",
                       "-print_final_stats=1", f"-dict={DICTIONARY}",
                       f"-artifact_prefix={os.getcwd()}/safetensors-"]
            if args.max_total_time:
                command.append(f"-max_total_time={args.max_total_time}")
            command += [work, *inputs]
        else:
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}", *inputs]
        run_fuzzer("run_safetensors_fuzz.py", command)


if __name__ == "__main__":
    main()
