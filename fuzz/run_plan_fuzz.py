#!/usr/bin/env python3
"""A short, deterministic fuzz run of a JSON reader (a ctest test): plan.json
(PlanFuzzer), or the cluster files of partition-plan --cluster
(ClusterFuzzer, --reader cluster).

  run_plan_fuzz.py FUZZER --tests DIR [--reader plan|cluster] [--runs N]
                   [--seed S] [--libfuzzer]

Seeds: every plan file of the test suite (DIR/**/Inputs/*.json), every plan
a test writes (`echo '{...}' > %t/NAME.json` in DIR/**/*.test and *.mlir),
and fuzz/corpus/READER/ (the cluster reader's seeds; past findings, kept as
regression inputs). Both readers get every JSON object the tests write. Runs
FUZZER for N mutated inputs: libFuzzer with a JSON dictionary
(fuzz/plan.dict) and memory caps (-rss_limit_mb, -malloc_limit_mb) when
--libfuzzer, else the StandaloneFuzzDriver under ASan with
max_allocation_size_mb. Fails if the fuzzer reports a crash, a sanitizer
error, a leak or an allocation beyond the cap; libFuzzer then leaves the
input as READER-crash-* in the working directory.
"""

import argparse
import glob
import os
import re
import sys
import tempfile

from fuzz_session import run_fuzzer

HERE = os.path.dirname(os.path.abspath(__file__))
WRITTEN = re.compile(r"echo '(\{[^']*\})' > %t/[\w.-]+\.json")


def seeds(tests, reader):
    """Plan files of the test suite and plans its tests write."""
    found = {}
    for path in glob.glob(os.path.join(tests, "**", "Inputs", "*.json"),
                          recursive=True):
        found[os.path.relpath(path, tests)] = open(path, "rb").read()
    for pattern in ("*.test", "*.mlir"):
        for path in glob.glob(os.path.join(tests, "**", pattern),
                              recursive=True):
            text = open(path, encoding="utf-8", errors="replace").read()
            for index, match in enumerate(WRITTEN.finditer(text)):
                name = f"{os.path.relpath(path, tests)}#{index}"
                found[name] = match.group(1).encode()
    for path in glob.glob(os.path.join(HERE, "corpus", reader, "*")):
        found["corpus/" + os.path.basename(path)] = open(path, "rb").read()
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fuzzer")
    parser.add_argument("--tests", required=True)
    parser.add_argument("--reader", choices=["plan", "cluster"],
                        default="plan")
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--libfuzzer", action="store_true")
    args = parser.parse_args()

    found = seeds(args.tests, args.reader)
    if len(found) < 20:
        sys.exit(f"run_plan_fuzz.py: only {len(found)} seed plans under "
                 f"{args.tests}; is --tests the test directory?")
    with tempfile.TemporaryDirectory(prefix=f"{args.reader}-fuzz-") as scratch:
        corpus = os.path.join(scratch, "seeds")
        work = os.path.join(scratch, "work")
        os.makedirs(corpus)
        os.makedirs(work)
        for index, (name, data) in enumerate(sorted(found.items())):
            with open(os.path.join(corpus, f"seed-{index:04d}.json"),
                      "wb") as f:
                f.write(data)
        env = dict(os.environ)
        if args.libfuzzer:
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}", "-rss_limit_mb=1024",
                       "-malloc_limit_mb=256", "-max_len=4096",
                       "-timeout=10", "-print_final_stats=1",
                       f"-dict={os.path.join(HERE, 'plan.dict')}",
                       f"-artifact_prefix={os.getcwd()}/{args.reader}-", work,
                       corpus]
        else:
            command = [args.fuzzer, f"-runs={args.runs}",
                       f"-seed={args.seed}", corpus]
            env["ASAN_OPTIONS"] = ("max_allocation_size_mb=256:"
                                   "allocator_may_return_null=0:"
                                   + env.get("ASAN_OPTIONS", ""))
        print(f"{len(found)} seeds for the {args.reader} reader", flush=True)
        run_fuzzer("run_plan_fuzz.py", command, env=env)


if __name__ == "__main__":
    main()
