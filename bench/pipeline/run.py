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


def measure(bindir, work, model, schedule, extra, micro, steps, ranks):
    plan = {"mesh": {"pp": ranks},
            "pipeline": dict({"schedule": schedule, "microbatches": micro}, **extra)}
    tag = f"{schedule}-m{micro}"
    plan_path = os.path.join(work, tag + ".json")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    ptp = os.path.join(work, tag + ".ptp")
    report = run([os.path.join(bindir, "partition-compile"), model, "--plan",
                  plan_path, "-o", ptp, "--memory-report"]).stdout
    predicted = float(re.search(r"bubble ([0-9.]+)% of the step", report).group(1))
    trace = os.path.join(work, tag + ".trace.json")
    metrics = os.path.join(work, tag + ".jsonl")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    run(["mpirun", "-n", str(ranks), "--oversubscribe",
         os.path.join(bindir, "partition-run"), ptp, "--steps", str(steps),
         "--eval-every", "0", "--trace", trace, "--metrics-out", metrics,
         "--quiet"], env=env)
    warm = 2  # the first steps allocate and fault pages in
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
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--micro", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-pipeline-")
    model = os.path.join(work, "g.mlir")
    run([os.path.join(args.bin, "partition-gen"), "--preset", "gpt2-tiny",
         "--layers", str(args.layers), "--hidden", str(args.hidden), "-o", model])
    print(f"gpt2-tiny, {args.layers} layers, hidden {args.hidden}, pp=2 on 2 CPU "
          f"ranks, {args.steps} steps (median after 2 warm-up steps)")
    print("| schedule | m | predicted bubble | step ms | idle stage 0 | idle stage 1 |")
    print("|---|---|---|---|---|---|")
    for micro in args.micro:
        for schedule, extra in SCHEDULES:
            predicted, step_ms, idle = measure(args.bin, work, model, schedule,
                                               extra, micro, args.steps, 2)
            print(f"| {schedule} | {micro} | {predicted:.1f}% | {step_ms:.1f} | "
                  f"{idle[0]:.1f}% | {idle[1]:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
