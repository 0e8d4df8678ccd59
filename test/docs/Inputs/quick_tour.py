#!/usr/bin/env python3
"""Runs the commands of the README's quick tour, as a user would type them.

The tour is the fenced block after the line `<!-- quick-tour ... -->` in
README.md. Lines starting with `#` (comments and the expected output) are
skipped; every other line is one command, run verbatim with bash in a fresh
directory whose `build` is a link to the build tree (so `build/bin/...`
means the tools under test). Each command is echoed as `$ COMMAND` before
its output; the first one that fails stops the tour with one line naming it.

Usage: quick_tour.py README.md WORKDIR --tool PATH-OF-ANY-BUILT-TOOL
"""
import argparse
import os
import shutil
import subprocess
import sys

MARKER = "<!-- quick-tour"


def tour_commands(readme):
    lines = open(readme, encoding="utf-8").read().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(MARKER)]
    if len(starts) != 1:
        sys.exit(f"quick-tour: error: {readme} has {len(starts)} lines starting "
                 f"with '{MARKER}'; mark exactly one fenced block")
    i = starts[0] + 1
    if i >= len(lines) or not lines[i].startswith("```"):
        sys.exit(f"quick-tour: error: {readme}:{i + 1}: the quick-tour marker "
                 "must be followed by a fenced code block")
    commands = []
    for number in range(i + 1, len(lines)):
        line = lines[number].strip()
        if line.startswith("```"):
            break
        if line and not line.startswith("#"):
            commands.append((number + 1, line))
    else:
        sys.exit(f"quick-tour: error: {readme}: the quick-tour block is not closed")
    if not commands:
        sys.exit(f"quick-tour: error: {readme}: the quick-tour block has no command")
    return commands


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("readme")
    parser.add_argument("workdir")
    parser.add_argument("--tool", required=True,
                        help="a tool of the build tree, e.g. build/bin/partition-run")
    args = parser.parse_args()

    build = os.path.dirname(os.path.dirname(os.path.abspath(args.tool)))
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    os.symlink(build, os.path.join(args.workdir, "build"))

    for number, command in tour_commands(args.readme):
        print(f"$ {command}", flush=True)
        result = subprocess.run(["bash", "-c", command], cwd=args.workdir,
                                stderr=subprocess.STDOUT)
        if result.returncode != 0:
            print(f"quick-tour: error: {args.readme}:{number}: `{command}` "
                  f"exited with {result.returncode}", flush=True)
            return 1
    print("quick-tour: every command ran", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
