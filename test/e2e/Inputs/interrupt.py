#!/usr/bin/env python3
"""Interrupts a training run the way a user or a scheduler does.

  interrupt.py --signal INT|TERM --metrics FILE [--after-step N]
               [--rank R|all|group] [--twice] [--delay S] [--max-seconds S]
               -- COMMAND...

Starts COMMAND (partition-run, or mpirun / partition-run --nproc running
it) in a session of its own, waits until FILE (its --metrics-out) records
step N (default 1), then sends the signal: to COMMAND itself, or with
--rank to the process of that world rank (OMPI_COMM_WORLD_RANK), to every
rank, or to COMMAND's process group (what Ctrl-C in a terminal does). --twice sends it a second time 50 ms later (give it a run whose
steps take longer). --delay waits S seconds more after step N (to land in
an evaluation that follows it rather than between the step and it). Fails unless the job ends
within S seconds (default 60) and leaves no rank running. Prints the job's
output, then "exit: CODE" (or "exit: signal N") and, when FILE has a
summary, "metrics: steps A-B, summary interrupted NAME after K steps".
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ranks import alive, descendants, kill_group, world_rank  # noqa: E402


def steps_recorded(path):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    steps = 0
    for line in lines:
        try:
            steps = max(steps, json.loads(line).get("step", 0))
        except ValueError:
            pass  # A line being written.
    return steps


def rank_pids(root):
    ranks = {}
    for pid in descendants(root):
        rank = world_rank(pid)
        if rank is not None:
            ranks.setdefault(rank, pid)
    return ranks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--signal", choices=["INT", "TERM"], required=True)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--after-step", type=int, default=1)
    parser.add_argument("--rank")
    parser.add_argument("--twice", action="store_true")
    parser.add_argument("--delay", type=float, default=0)
    parser.add_argument("--max-seconds", type=float, default=60)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        sys.exit("interrupt.py: no command")
    number = signal.SIGINT if args.signal == "INT" else signal.SIGTERM

    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + args.max_seconds
    ranks = {}
    try:
        while steps_recorded(args.metrics) < args.after_step:
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.communicate()[0] if process.poll() is not None else ""
                sys.exit(f"interrupt.py: the run never recorded step "
                         f"{args.after_step}:\n{output}")
            time.sleep(0.01)
        time.sleep(args.delay)
        ranks = rank_pids(process.pid)
        if args.rank is None or args.rank == "group":
            victims = [process.pid]
        else:
            if args.rank == "all":
                victims = list(ranks.values())
            elif int(args.rank) in ranks:
                victims = [ranks[int(args.rank)]]
            else:
                sys.exit(f"interrupt.py: no process of rank {args.rank} "
                         f"(found {sorted(ranks)})")
        for time_ in range(2 if args.twice else 1):
            if time_:
                # Two signals sent at once merge into one pending signal.
                time.sleep(0.05)
            for pid in victims:
                if args.rank == "group":
                    os.killpg(pid, number)
                else:
                    os.kill(pid, number)
        try:
            output = process.communicate(
                timeout=max(1.0, deadline - time.monotonic()))[0]
        except subprocess.TimeoutExpired:
            sys.exit(f"interrupt.py: still running {args.max_seconds} s "
                     f"after SIG{args.signal}")
        sys.stdout.write(output)
        code = process.returncode
        print(f"exit: {code}" if code >= 0 else f"exit: signal {-code}")
        time.sleep(0.2)
        left = [pid for pid in ranks.values() if alive(pid)]
        if left:
            sys.exit(f"interrupt.py: ranks still running: {left}")
        with open(args.metrics) as f:
            records = [json.loads(line) for line in f if line.strip()]
        steps = [r["step"] for r in records if "step" in r]
        summaries = [r for r in records if r.get("summary")]
        if summaries:
            last = summaries[-1]
            print(f"metrics: steps {steps[0]}-{steps[-1]}, summary "
                  f"interrupted {last.get('interrupted')} after "
                  f"{last.get('steps_done')} steps")
    finally:
        if process.poll() is None:
            kill_group(process)
            process.wait()


if __name__ == "__main__":
    main()
