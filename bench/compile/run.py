#!/usr/bin/env python3
"""Compile time and program size against the micro-batch count (issue 31).

  bench/compile/run.py [--build build] [--repeats 3] [--quick]

For each model and plan, partition-compile at several micro-batch counts,
with the micro-batch loop (--action-walk=false), with the action walk
for a pipeline (the default: one copy of each kind of action, the
schedule walked as data)
and with --unroll-microbatches (every micro-batch's code, as before the
loop), interleaved and repeated; prints how many micro-batches the looped step
compiles (its --memory-report's "micro-batch loop" line), the best wall
time of each, the .ptp size and the arena (memory plan), and each figure's
ratio to the smallest count's. Then, for one small model, the step time of the two programs
trained side by side (partition-run's step_ms, medians), since the loop
must not slow the step. Timings are the machine's: read them as ratios.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(command), result.stdout,
                                       result.stderr))
    return result.stdout


def arena(report):
    """The arena of the rank's program; with a pipeline, its largest stage's."""
    peak = 0
    for line in report.splitlines():
        words = line.split()
        if line.startswith("memory: arena_peak ") and words[2].isdigit():
            peak = max(peak, int(words[2]))
        elif (line.startswith("memory: stage ") and len(words) == 5 and
              words[3] == "arena_peak" and words[4].isdigit()):
            peak = max(peak, int(words[4]))
    return peak


def compiled_microbatches(report):
    """How many micro-batches the step compiles (partition-compile
    --memory-report's "micro-batch loop" line), or None without one."""
    for line in report.splitlines():
        words = line.split()
        if line.startswith("micro-batch loop: the step compiles "):
            return int(words[5])
        if line.startswith("micro-batch loop: none;"):
            return int(words[9])
    return None


def compile_once(bin_dir, model, plan, micro, variant, out):
    command = [os.path.join(bin_dir, "partition-compile"), model, "-o", out,
               "--memory-report"]
    if plan:
        # The plan's pipeline.microbatches (a pipeline checks it).
        with open(plan) as f:
            fields = json.load(f)
        fields.setdefault("pipeline", {})["microbatches"] = micro
        counted = "%s-%d.json" % (plan[:-len(".json")], micro)
        with open(counted, "w") as f:
            json.dump(fields, f)
        command += ["--plan", counted]
    else:
        command += ["--microbatches", str(micro)]
    if variant == "unrolled":
        command.append("--unroll-microbatches")
    elif variant == "walk":
        command.append("--action-walk")
    else:  # The loop over the schedule's periods (pipelines walk by default).
        command.append("--action-walk=false")
    start = time.perf_counter()
    report = run(command)
    return (time.perf_counter() - start, os.path.getsize(out), arena(report),
            compiled_microbatches(report))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="gpt2-tiny only, one repeat")
    parser.add_argument("--case", default="",
                        help="only the cases whose name contains this")
    parser.add_argument("--no-step", action="store_true",
                        help="skip the step-time comparison")
    parser.add_argument("--loop-up-to", type=int, default=256,
                        help="the most micro-batches llama-70b's pipelines "
                        "compile with the loop (it grows with them)")
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    work = tempfile.mkdtemp(prefix="bench-compile-")

    def gen(name, flags):
        path = os.path.join(work, name + ".mlir")
        run([os.path.join(bin_dir, "partition-gen")] + flags + ["-o", path])
        return path

    def plan(name, text):
        path = os.path.join(work, name + ".json")
        with open(path, "w") as f:
            f.write(text)
        return path

    tiny = gen("tiny", ["--preset", "gpt2-tiny", "--layers", "4"])
    # (name, model, plan, micro-batch counts, the largest to compile
    # unrolled, the largest to compile with the loop)
    cases = [
        ("gpt2-tiny 4 layers, one rank", tiny, None, [8, 64, 256, 1024], 256,
         1024),
        ("gpt2-tiny 4 layers, pp2 1F1B", tiny,
         plan("tiny-pp2", json.dumps({"mesh": {"pp": 2},
                                      "pipeline": {"schedule": "1f1b"}})),
         [8, 64, 256, 1024], 256, 1024),
        # GPipe holds every micro-batch: its walk has a slot each (one
        # copy repeated at a stride), and --action-walk=false unrolls it
        # (no periods to loop over).
        ("gpt2-tiny 4 layers, pp2 GPipe", tiny,
         plan("tiny-gpipe", json.dumps({"mesh": {"pp": 2},
                                        "pipeline": {"schedule": "gpipe"}})),
         [8, 64, 256, 1024], 256, 0),
    ]
    if not args.quick:
        llama = gen("llama70b", ["--preset", "llama-70b", "--batch", "4"])
        sharded = {"tensor_parallel": {"sequence_parallel": True},
                   "zero": {"stage": 1}, "recompute": {"policy": "selective"},
                   "precision": "bf16"}
        cases.append(
            ("llama-70b dp4 x tp8, ZeRO-1, selective, bf16", llama,
             plan("llama70b", json.dumps(
                 dict(sharded, mesh={"dp": 4, "tp": 8}))),
             [8, 32, 256], 32, 256))
        for schedule, chunks in (("1f1b", 1), ("interleaved-1f1b", 2)):
            cases.append(
                ("llama-70b dp4 x tp8 x pp4, %s%s, ZeRO-1, selective, bf16" %
                 (schedule, " v2" if chunks > 1 else ""), llama,
                 plan("llama70b-pp4-" + schedule, json.dumps(dict(
                     sharded, mesh={"dp": 4, "tp": 8, "pp": 4},
                     pipeline={"schedule": schedule,
                               "virtual_stages": chunks}))),
                 [8, 32, 256], 32, args.loop_up_to))
    if args.case:
        cases = [c for c in cases if args.case in c[0]]
    repeats = 1 if args.quick else args.repeats
    print("| model, plan | micro-batches | compiled (loop) | compile (loop) "
          "| x | program (loop) | x | arena (loop) | compile (walk) | x "
          "| program (walk) | x | arena (walk) | compile (unrolled) "
          "| program (unrolled) | arena (unrolled) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
          "|---:|---:|---:|")
    for name, model, plan_path, counts, unroll_up_to, loop_up_to in cases:
        base = {}
        for micro in counts:
            times = {"loop": [], "walk": [], "unrolled": []}
            sizes, arenas, compiled = {}, {}, {}
            for _ in range(repeats):
                for variant in ("loop", "walk", "unrolled"):
                    if ((variant == "unrolled" and micro > unroll_up_to) or
                            (variant == "loop" and micro > loop_up_to) or
                            (variant == "walk" and "pp" not in name)):
                        continue
                    out = os.path.join(work, "p-%s.ptp" % variant)
                    seconds, size, peak, built = compile_once(
                        bin_dir, model, plan_path, micro, variant, out)
                    times[variant].append(seconds)
                    sizes[variant], arenas[variant] = size, peak
                    compiled[variant] = built

            def columns(variant, ratios):
                if not times[variant]:
                    return ["-"] * (5 if ratios else 3)
                best = min(times[variant])
                base.setdefault(variant, (best, sizes[variant]))
                first = base[variant]
                cells = ["%.2f s" % best]
                if ratios:
                    cells.append("%.2f" % (best / first[0]))
                cells.append("%.2f MB" % (sizes[variant] / 1e6))
                if ratios:
                    cells.append("%.2f" % (sizes[variant] / first[1]))
                cells.append("%.1f MB" % (arenas[variant] / 1e6))
                return cells

            built = compiled.get("loop")
            print("| " + " | ".join(
                [name, str(micro), "-" if built is None else str(built)] +
                columns("loop", True) + columns("walk", True) +
                columns("unrolled", False)) + " |", flush=True)

    if args.no_step:
        return
    # The step: the loop's program against the unrolled one, interleaved;
    # on one rank, and as a 1F1B and a GPipe pipeline on 2 ranks (1 thread
    # each; GPipe has no loop: --action-walk=false unrolls it).
    model = gen("small", ["--preset", "gpt2-tiny", "--layers", "4",
                          "--hidden", "256", "--heads", "4"])
    pp2 = plan("small-pp2", json.dumps({"mesh": {"pp": 2},
                                        "pipeline": {"schedule": "1f1b"}}))
    gpipe = plan("small-gpipe", json.dumps({"mesh": {"pp": 2},
                                            "pipeline": {"schedule":
                                                         "gpipe"}}))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    for label, plan_path, ranks, variants in (
            ("one rank", None, 1, ["loop", "unrolled"]),
            ("pp2 1F1B, 2 ranks x 1 thread", pp2, 2,
             ["loop", "unrolled", "walk"]),
            ("pp2 GPipe, 2 ranks x 1 thread", gpipe, 2,
             ["unrolled", "walk"])):
        steps = {}
        for variant in variants:
            out = os.path.join(work, "step-%s.ptp" % variant)
            compile_once(bin_dir, model, plan_path, 16, variant, out)
            steps[variant] = []
        for _ in range(1 if args.quick else 3):
            for variant in variants:
                metrics = os.path.join(work, "m-%s.jsonl" % variant)
                command = [os.path.join(bin_dir, "partition-run"),
                           os.path.join(work, "step-%s.ptp" % variant),
                           "--steps", "12", "--eval-every", "0",
                           "--metrics-out", metrics, "--quiet"]
                if ranks > 1:
                    command = ["mpirun", "-n", str(ranks),
                               "--oversubscribe"] + command
                result = subprocess.run(command, capture_output=True,
                                        text=True, env=env)
                if result.returncode != 0:
                    sys.exit("failed: %s\n%s" % (" ".join(command),
                                                 result.stderr))
                with open(metrics) as f:
                    records = [json.loads(line) for line in f
                               if line.strip()]
                steps[variant] += [r["step_ms"] for r in records
                                   if "step_ms" in r][2:]
        medians = {v: statistics.median(steps[v]) for v in variants}
        print("\nstep (gpt2-tiny 4 layers, hidden 256, 16 micro-batches, "
              "%s): %s" % (label, ", ".join(
                  "%s %.1f ms (%.3f x unrolled)" % (
                      v, medians[v], medians[v] / medians["unrolled"])
                  for v in variants)), flush=True)


if __name__ == "__main__":
    main()
