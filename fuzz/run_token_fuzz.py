#!/usr/bin/env python3
"""A short, deterministic fuzz run of the token-data reader (a ctest test).

  run_token_fuzz.py FUZZER --files FILES_PY [--runs N] [--seed S]
                    [--libfuzzer] [--corpus DIR] [--keep-seeds DIR]

Builds a seed corpus in a temporary directory -- token files written by the
e2e tests' own generator (FILES_PY, test/e2e/Inputs/files.py: raw uint16
and uint32, llm.c shards of both widths, one with another magic, one of
another version, .npy arrays of uint16, uint32 and int32), plus an
odd-length file, a truncated shard, a header alone, a shard whose count
disagrees with its size, ids beyond the vocabulary and a text file, each
behind the fuzzer's 8 control bytes (TokenDataFuzzer.cpp) in every format
-- adds the kept reproducers of fuzz/corpus/token-data, then runs FUZZER
for N mutated inputs (libFuzzer flags when --libfuzzer, else the
StandaloneFuzzDriver's). Allocations are capped (libFuzzer -malloc_limit_mb
and -rss_limit_mb; ASan's max_allocation_size_mb for the replay driver).
Fails if the fuzzer reports a crash, a sanitizer error, an allocation
beyond the cap or an exception other than DataError; libFuzzer then leaves
the input as token-data-crash-* in the working directory.
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile

from fuzz_session import run_fuzzer

MALLOC_LIMIT_MB = 256
RSS_LIMIT_MB = 1024


def control(format_index, vocab=256, batch=2, seq=8, fraction=26, seek=0):
    return bytes([format_index, (vocab - 1) & 0xff, (vocab - 1) >> 8,
                  batch - 1, seq - 1, fraction, seek & 0xff, seek >> 8])


def make_seeds(files_py, directory):
    scratch = os.path.join(directory, "files")
    os.makedirs(scratch)

    def generate(name, *flags):
        path = os.path.join(scratch, name)
        subprocess.run([sys.executable, files_py, "tokens", path, *flags],
                       check=True, capture_output=True)
        return open(path, "rb").read()

    raw = generate("raw.bin", "--count", "300")
    shard = generate("shard.bin", "--count", "300", "--llmc-magic", "20240520")
    files = {
        "raw": raw,
        "shard": shard,
        "big-vocab": generate("big.bin", "--count", "200", "--vocab", "50257",
                              "--llmc-magic", "20240520"),
        "out-of-vocab": generate("oov.bin", "--count", "300", "--bad-at",
                                 "123", "--bad-value", "300"),
        "other-magic": generate("magic.bin", "--count", "64", "--llmc-magic",
                                "20240519"),
        "other-version": generate("version.bin", "--count", "64",
                                  "--llmc-magic", "20240520",
                                  "--llmc-version", "2"),
        "odd": raw[:-1],
        "truncated-shard": shard[:-7],
        "header-only": shard[:1024],
        "short-header": shard[:100],
        "count-mismatch": shard[:8] + struct.pack("<i", 299) + shard[12:],
        "negative-count": shard[:8] + struct.pack("<i", -1) + shard[12:],
        "huge-count": shard[:8] + struct.pack("<i", 0x7fffffff) + shard[12:],
        "shard32": generate("shard32.bin", "--count", "300", "--width", "4",
                            "--vocab", "128256", "--llmc-magic", "20240801",
                            "--llmc-version", "7"),
        "raw32": generate("raw32.bin", "--count", "300", "--width", "4"),
        "npy-u2": generate("u2.npy", "--count", "300", "--npy", "u2"),
        "npy-u4": generate("u4.npy", "--count", "300", "--npy", "u4"),
        "npy-i4-negative": generate("i4.npy", "--count", "300", "--npy", "i4",
                                    "--bad-at", "7", "--bad-value", "-3"),
        "text": b"The quick brown fox jumps over the lazy dog.\n" * 8,
        "empty": b"",
    }
    seeds = os.path.join(directory, "seeds")
    os.makedirs(seeds)
    for name, content in files.items():
        for index, fmt in enumerate(
                ["auto", "llmc", "raw", "raw32", "npy", "text"]):
            with open(os.path.join(seeds, f"{name}-{fmt}"), "wb") as f:
                f.write(control(index) + content)
    # Small vocabularies, long windows and a checkpoint position to seek to.
    with open(os.path.join(seeds, "shard-small-vocab"), "wb") as f:
        f.write(control(0, vocab=7, batch=4, seq=64, fraction=128,
                        seek=100) + shard)
    return seeds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fuzzer")
    parser.add_argument("--files", required=True)
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--libfuzzer", action="store_true")
    parser.add_argument("--corpus", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "token-data"))
    parser.add_argument("--keep-seeds",
                        help="also copy the seed corpus into this directory")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="token-fuzz-") as scratch:
        seeds = make_seeds(args.files, scratch)
        if args.keep_seeds:
            os.makedirs(args.keep_seeds, exist_ok=True)
            for name in os.listdir(seeds):
                with open(os.path.join(seeds, name), "rb") as f:
                    data = f.read()
                with open(os.path.join(args.keep_seeds, name), "wb") as f:
                    f.write(data)
        corpora = [seeds]
        if os.path.isdir(args.corpus):
            corpora.append(args.corpus)
        env = dict(os.environ)
        if args.libfuzzer:
            work = os.path.join(scratch, "work")
            os.makedirs(work)
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}",
                       f"-malloc_limit_mb={MALLOC_LIMIT_MB}",
                       f"-rss_limit_mb={RSS_LIMIT_MB}", "-max_len=16384",
                       "-timeout=30", "-print_final_stats=1",
                       f"-artifact_prefix={os.getcwd()}/token-data-",
                       work, *corpora]
        else:
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}", *corpora]
            # The replay driver has no memory cap of its own: ASan's (when
            # it is built with ASan) reports any larger allocation.
            env["ASAN_OPTIONS"] = ":".join(filter(None, [
                env.get("ASAN_OPTIONS", ""),
                f"max_allocation_size_mb={MALLOC_LIMIT_MB}",
                "allocator_may_return_null=0"]))
        run_fuzzer("run_token_fuzz.py", command, env=env)


if __name__ == "__main__":
    main()
