#!/usr/bin/env python3
"""Runs a command that must fail cleanly, and prints its stderr.

  expect_error.py --exit CODE [--lines N] [--first PREFIX] -- COMMAND...

Fails unless COMMAND exits with CODE (a clean exit: a signal, such as the
SIGABRT of an uncaught exception, is a failure), writes nothing to stdout,
and writes exactly N lines (default 1) to stderr, the first starting with
PREFIX (default "<tool>: error: "; a compiler's first line is the located
diagnostic) and none saying "terminate called". The caller checks the
text with FileCheck.
"""

import argparse
import os
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit", type=int, required=True)
    parser.add_argument("--lines", type=int, default=1)
    parser.add_argument("--first", default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        sys.exit("expect_error.py: no command")
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=120)
    sys.stdout.write(result.stderr)
    tool = os.path.basename(command[0])
    problems = []
    if result.returncode < 0:
        problems.append(f"killed by signal {-result.returncode}")
    elif result.returncode != args.exit:
        problems.append(f"exit code {result.returncode}, expected {args.exit}")
    if result.stdout:
        problems.append(f"wrote to stdout: {result.stdout!r}")
    lines = result.stderr.splitlines()
    if len(lines) != args.lines:
        problems.append(f"{len(lines)} lines on stderr, expected {args.lines}")
    first = args.first if args.first is not None else f"{tool}: error: "
    if not lines or not lines[0].startswith(first):
        problems.append(f"stderr does not start with '{first}'")
    if "terminate called" in result.stderr:
        problems.append("an uncaught exception")
    if problems:
        sys.stderr.write("expect_error.py: " + "; ".join(problems) + "\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
