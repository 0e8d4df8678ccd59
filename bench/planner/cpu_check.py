#!/usr/bin/env python3
"""The planner's predictions against measured CPU ranks (a bench, not a test).

  cpu_check.py [--bin BUILD/bin] [--cluster FILE.json] [--steps N]
               [--rounds R] [--workdir DIR]

Calibrates this machine (partition-plan --calibrate, unless --cluster names
a profile file already measured), then for each plan below: generates a
small GPT (2 layers, hidden 128, 4 heads, sequence 128, vocabulary 512;
global batch 8), compiles it with the plan, trains it for --steps steps on
its ranks (partition-run --nproc) and takes the median step time of the
steps after the first two, over --rounds rounds of all plans (interleaved,
so that a busy minute of a shared machine hits every plan); asks partition-plan --plan for the prediction;
prints the table (markdown): measured, predicted, error, and both ranks.
The figures in bench/README.md come from it. The machine is shared: run it
when it is quiet, or expect noise.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

MODEL = ["--arch", "gpt2", "--layers", "2", "--hidden", "128", "--heads",
         "4", "--vocab", "512", "--seq-len", "128"]
GLOBAL_BATCH = 8

# name, plan.json, ranks
PLANS = [
    ("dp2", {"mesh": {"dp": 2}}, 2),
    ("tp2", {"mesh": {"tp": 2}}, 2),
    ("tp2 + SP", {"mesh": {"tp": 2},
                  "tensor_parallel": {"sequence_parallel": True}}, 2),
    ("dp2, recompute full", {"mesh": {"dp": 2},
                             "recompute": {"policy": "full"}}, 2),
    ("dp2, 2 micro-batches", {"mesh": {"dp": 2},
                              "pipeline": {"microbatches": 2}}, 2),
    ("dp4", {"mesh": {"dp": 4}}, 4),
    ("dp2 x tp2", {"mesh": {"dp": 2, "tp": 2}}, 4),
]


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit("cpu_check.py: %s failed:\n%s%s" %
                 (" ".join(command), result.stdout, result.stderr))
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=None)
    parser.add_argument("--cluster", default=None,
                        help="a measured profile (default: calibrate now)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    tool = lambda name: (os.path.join(args.bin, name) if args.bin
                         else shutil.which(name))
    work = args.workdir or tempfile.mkdtemp(prefix="planner-cpu-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

    cluster = args.cluster
    if not cluster:
        cluster = os.path.join(work, "cpu-local.json")
        run([tool("partition-plan"), "--calibrate", "-o", cluster], env)
    print("cluster: %s" % cluster, file=sys.stderr)

    prepared = []
    for name, plan, ranks in PLANS:
        slug = name.replace(" ", "").replace(",", "-").replace("+", "")
        microbatches = plan.get("pipeline", {}).get("microbatches", 1)
        model = os.path.join(work, slug + ".mlir")
        run([tool("partition-gen")] + MODEL +
            ["--batch", str(GLOBAL_BATCH // microbatches), "-o", model])
        plan_file = os.path.join(work, slug + ".json")
        with open(plan_file, "w") as f:
            json.dump(plan, f)
        program = os.path.join(work, slug + ".ptp")
        run([tool("partition-compile"), model, "--plan", plan_file, "-o",
             program])
        predicted = json.loads(run(
            [tool("partition-plan"), model, "--cluster", cluster, "--plan",
             plan_file, "--global-batch", str(GLOBAL_BATCH), "--json",
             "--top", "1", "--memory", "closed-form"]))[0]
        prepared.append((name, slug, ranks, program, predicted["step_s"]))

    samples = {name: [] for name, *_ in prepared}
    for round_ in range(args.rounds):
        for name, slug, ranks, program, _ in prepared:
            metrics = os.path.join(work, "%s.%d.jsonl" % (slug, round_))
            run([tool("partition-run"), "--nproc", str(ranks), program,
                 "--steps", str(args.steps), "--metrics-out", metrics], env)
            steps = [json.loads(line) for line in open(metrics)]
            times = [s["step_ms"] for s in steps if "step_ms" in s and
                     s.get("step", 0) > 2]
            samples[name].append(statistics.median(times) / 1e3)
            print("round %d %-24s measured %8.1f ms" %
                  (round_ + 1, name, 1e3 * samples[name][-1]),
                  file=sys.stderr)
    rows = [(name, ranks, statistics.median(samples[name]), predicted)
            for name, slug, ranks, program, predicted in prepared]

    by_measured = sorted(range(len(rows)), key=lambda i: rows[i][2])
    by_predicted = sorted(range(len(rows)), key=lambda i: rows[i][3])
    print("| plan | ranks | measured (median) | predicted | error "
          "| measured rank | predicted rank |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst = 0
    for i, (name, ranks, measured, predicted) in enumerate(rows):
        error = predicted / measured - 1
        worst = max(worst, abs(error))
        print("| %s | %d | %.1f ms | %.1f ms | %+.1f%% | %d | %d |" %
              (name, ranks, 1e3 * measured, 1e3 * predicted, 100 * error,
               by_measured.index(i) + 1, by_predicted.index(i) + 1))
    print()
    print("largest error %.1f%%; ranked in measured order: %s" %
          (100 * worst, "yes" if by_measured == by_predicted else "no"))


if __name__ == "__main__":
    main()
