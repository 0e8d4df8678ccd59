#!/usr/bin/env python3
"""Runs partition-run on copies of a program with one byte corrupted.

  corrupt_sweep.py PARTITION_RUN PROGRAM --count N [-- RUN ARGS...]

Corrupts the byte at N offsets spread evenly over the file (XOR 0xFF; all
of the bytes are tried by ProgramCorruptionTest, in-process). Whatever the
byte held -- a size, an offset, an index, a kernel id, a float constant,
a character of a name -- partition-run must either run (a float constant
may change the numbers) or exit 1 with one "partition-run: error:" line:
never die of a signal, never report an uncaught exception, never hang.
Prints a summary: how many were rejected, and the first line of each
distinct error kind.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("runner")
    parser.add_argument("program")
    parser.add_argument("--count", type=int, required=True)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    extra = argv[split + 1:]
    original = open(args.program, "rb").read()
    offsets = sorted({i * len(original) // args.count
                      for i in range(args.count)})
    outcomes = collections.Counter()
    kinds = collections.Counter()
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "corrupt.ptp")
        for offset in offsets:
            data = bytearray(original)
            data[offset] ^= 0xFF
            open(path, "wb").write(bytes(data))
            try:
                result = subprocess.run([args.runner, path, *extra],
                                        capture_output=True, text=True,
                                        timeout=120)
            except subprocess.TimeoutExpired:
                failures.append(f"byte {offset}: hangs")
                continue
            lines = result.stderr.splitlines()
            if result.returncode == 0:
                outcomes["ran"] += 1
            elif (result.returncode == 1 and len(lines) == 1 and
                  lines[0].startswith("partition-run: error: ") and
                  "terminate called" not in result.stderr):
                outcomes["rejected"] += 1
                # The kind of error: the message without numbers and names.
                kind = re.sub(r"\d+", "N", lines[0].split(": ", 3)[-1])
                kinds[re.sub(r"'[^']*'", "'X'", kind)[:90]] += 1
            else:
                failures.append(f"byte {offset}: exit {result.returncode}, "
                                f"stderr {result.stderr!r}")
    print(f"{len(offsets)} corrupted programs: {outcomes['rejected']} "
          f"rejected with one error line, {outcomes['ran']} ran, "
          f"{len(failures)} failed badly")
    for kind, count in kinds.most_common():
        print(f"  {count:4d} x {kind}")
    for failure in failures:
        print("FAILURE: " + failure)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
