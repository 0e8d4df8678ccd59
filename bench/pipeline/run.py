#!/usr/bin/env python3
"""Pipeline bubble on real ranks: predicted next to measured.

For each schedule and micro-batch count, compiles a small GPT with a pp=2
plan, trains it a few steps on 2 CPU ranks with --trace, and prints:
  - the bubble partition-compile --memory-report predicts (the schedule
    simulator with the stages' real costs);
  - the measured median step time (metrics, steps after warm-up);
  - per stage, the share of its step spent waiting in receives (the trace's
    recv spans cover their wait), i.e. the measured idle share.
A benchmark, never a test: the figures depend on the machine and its load.

    python3 bench/pipeline/run.py --bin build/bin [--steps 6] [--hidden 128]

With --repeats N every (schedule, m) is run N times, the runs interleaved
(one of each, then again) so that a change in the machine's load hits every
schedule alike; the table gives the median of the runs' median step times
and their spread (min-max), and the median idle shares.

    python3 bench/pipeline/run.py --hidden 512 --seq-len 128 --micro 8 \
        --schedules 1f1b zero-bubble --repeats 5 --steps 6

With --variants walk unrolled each case is also compiled with
--unroll-microbatches (every micro-batch's code, as before the action
walk), a row each, interleaved with the walk's runs: the walk must not
slow the step.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

SCHEDULES = [("gpipe", {}), ("1f1b", {}),
             ("interleaved-1f1b", {"virtual_stages": 2}),
             ("zero-bubble", {})]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


# How the step is compiled: the schedule walked as data (the default),
# or every micro-batch's code (as before issue 31).
VARIANTS = {"walk": [], "unrolled": ["--unroll-microbatches"]}


def measure(bindir, work, model, schedule, extra, micro, steps, ranks,
            warm=2, variant="walk"):
    plan = {"mesh": {"pp": ranks},
            "pipeline": dict({"schedule": schedule, "microbatches": micro}, **extra)}
    tag = f"{schedule}-m{micro}-{variant}"
    plan_path = os.path.join(work, tag + ".json")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    ptp = os.path.join(work, tag + ".ptp")
    report = run([os.path.join(bindir, "partition-compile"), model, "--plan",
                  plan_path, "-o", ptp, "--memory-report"] +
                 VARIANTS[variant]).stdout
    predicted = float(re.search(r"bubble ([0-9.]+)% of the step", report).group(1))
    trace = os.path.join(work, tag + ".trace.json")
    metrics = os.path.join(work, tag + ".jsonl")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    run(["mpirun", "-n", str(ranks), "--oversubscribe",
         os.path.join(bindir, "partition-run"), ptp, "--steps", str(steps),
         "--eval-every", "0", "--trace", trace, "--metrics-out", metrics,
         "--quiet"], env=env)
    # warm: the first steps allocate and fault pages in
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    step_ms = statistics.median(r["step_ms"] for r in rows
                               if "step_ms" in r and r["step"] > warm)
    with open(trace) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    idle = []
    for stage in range(ranks):
        spans = [e for e in events if e.get("ph") == "X" and e.get("pid") == stage
                 and e.get("args", {}).get("step", 0) > warm]
        shares = []
        for step in sorted({e["args"]["step"] for e in spans}):
            mine = [e for e in spans if e["args"]["step"] == step]
            wall = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
            wait = sum(e["dur"] for e in mine if e.get("cat") == "recv")
            shares.append(wait / wall if wall > 0 else 0.0)
        idle.append(100.0 * statistics.median(shares))
    return predicted, step_ms, idle


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--warmup", type=int, default=2,
                        help="steps left out of the medians")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--ffn", type=int, default=0,
                        help="feed-forward width (default: the preset's)")
    parser.add_argument("--heads", type=int, default=0)
    parser.add_argument("--seq-len", type=int, default=0)
    parser.add_argument("--batch", type=int, default=0,
                        help="sequences per micro-batch")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--micro", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--schedules", nargs="+",
                        default=[name for name, _ in SCHEDULES])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--variants", nargs="+", default=["walk"],
                        choices=sorted(VARIANTS),
                        help="walk (the default compile) and/or unrolled "
                        "(--unroll-microbatches), each a row")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-pipeline-")
    model = os.path.join(work, "g.mlir")
    gen = [os.path.join(args.bin, "partition-gen"), "--preset", "gpt2-tiny",
           "--layers", str(args.layers), "--hidden", str(args.hidden)]
    for flag, value in (("--ffn", args.ffn), ("--heads", args.heads),
                        ("--seq-len", args.seq_len), ("--batch", args.batch)):
        if value:
            gen += [flag, str(value)]
    run(gen + ["-o", model])
    shape = ", ".join(f"{name} {value}" for name, value in
                      (("ffn", args.ffn), ("heads", args.heads),
                       ("seq", args.seq_len), ("batch", args.batch)) if value)
    print(f"gpt2-tiny, {args.layers} layers, hidden {args.hidden}"
          f"{', ' + shape if shape else ''}, pp=2 on 2 CPU ranks, "
          f"{args.steps} steps (median after {args.warmup} warm-up steps)"
          f"{f', {args.repeats} interleaved runs each' if args.repeats > 1 else ''}")
    extras = dict(SCHEDULES)
    cases = [(micro, schedule, variant) for micro in args.micro
             for schedule in args.schedules for variant in args.variants]
    results = {case: [] for case in cases}
    for _ in range(args.repeats):
        for micro, schedule, variant in cases:
            results[(micro, schedule, variant)].append(
                measure(args.bin, work, model, schedule,
                        extras.get(schedule, {}), micro, args.steps, 2,
                        args.warmup, variant))
    label = " (compiled)" if len(args.variants) > 1 else ""
    if args.repeats > 1:
        print(f"| schedule{label} | m | predicted bubble | step ms (median "
              "of runs) | spread (min-max) | idle stage 0 | idle stage 1 |")
        print("|---|---|---|---|---|---|---|")
    else:
        print(f"| schedule{label} | m | predicted bubble | step ms | idle "
              "stage 0 | idle stage 1 |")
        print("|---|---|---|---|---|---|")
    for micro, schedule, variant in cases:
        runs = results[(micro, schedule, variant)]
        name = f"{schedule} ({variant})" if label else schedule
        predicted = runs[0][0]
        steps = [r[1] for r in runs]
        idle = [statistics.median(r[2][stage] for r in runs)
                for stage in range(2)]
        step_ms = statistics.median(steps)
        spread = (f" | {min(steps):.1f}-{max(steps):.1f}"
                  if args.repeats > 1 else "")
        print(f"| {name} | {micro} | {predicted:.1f}% | {step_ms:.1f}"
              f"{spread} | {idle[0]:.1f}% | {idle[1]:.1f}% |", flush=True)
    print("runs (step ms):", {f"{s}-m{m}-{v}": [round(r[1], 1) for r in
                                                 results[(m, s, v)]]
                              for m, s, v in cases})


if __name__ == "__main__":
    main()
