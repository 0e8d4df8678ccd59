#!/usr/bin/env python3
"""Multi-rank runs of partition-run that must end, and how they end.

  ranks.py fails [--max-seconds S] -- COMMAND...
      Runs COMMAND (e.g. mpirun -n 3 partition-run ...), prints its stdout
      and stderr, and fails unless it exits non-zero within S seconds
      (default 60; then it is killed, with its process group).

  ranks.py fault --signal KILL|STOP --rank R [--after-step N]
                 [--max-seconds S] -- COMMAND...
      Starts COMMAND (an mpirun job), waits until its output shows step N
      (default 2), sends the signal to world rank R (the process whose
      environment has OMPI_COMM_WORLD_RANK=R), then fails unless the job
      exits non-zero within S seconds (default 30) and no rank is left
      running. Prints the job's output, then "exit: non-zero" and
      "ranks left: 0". A stopped rank is killed at the end whatever happens.

  ranks.py close A B [--rtol X]
      Compares the losses and eval losses of two --metrics-out files
      step by step; fails if any relative difference exceeds X (default
      1e-4). Prints the steps compared and the largest difference.

  ranks.py summary FILE --ranks N
      Fails unless FILE's summary record has a "ranks" array of N entries,
      ranks 0..N-1, each with a positive peak_rss_bytes.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time


def descendants(pid):
    """Every process below pid (via /proc/*/stat parent ids)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def world_rank(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(item.split(b"=", 1)[1])
    except OSError:
        pass
    return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def start(command):
    return subprocess.Popen(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def kill_group(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass


def fails(args):
    process = start(args.command)
    try:
        output, _ = process.communicate(timeout=args.max_seconds)
    except subprocess.TimeoutExpired:
        kill_group(process)
        output, _ = process.communicate()
        sys.stdout.write(output)
        sys.exit(f"ranks.py: still running after {args.max_seconds} s")
    sys.stdout.write(output)
    if process.returncode == 0:
        sys.exit("ranks.py: exited 0, expected a failure")
    print("exit: non-zero")


def fault(args):
    process = start(args.command)
    lines = []
    reached = threading.Event()
    marker = f"step {args.after_step:5d}/"

    def read():
        for line in process.stdout:
            lines.append(line)
            if marker in line:
                reached.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    signalled = []
    try:
        if not reached.wait(args.max_seconds):
            sys.exit("ranks.py: the job never reached step "
                     f"{args.after_step}:\n" + "".join(lines))
        ranks = {}
        for pid in descendants(process.pid):
            rank = world_rank(pid)
            if rank is not None:
                ranks.setdefault(rank, pid)
        if args.rank not in ranks:
            sys.exit(f"ranks.py: no process of rank {args.rank} "
                     f"(found {sorted(ranks)})")
        victim = ranks[args.rank]
        number = signal.SIGKILL if args.signal == "KILL" else signal.SIGSTOP
        os.kill(victim, number)
        signalled.append(victim)
        began = time.monotonic()
        try:
            process.wait(timeout=args.max_seconds)
        except subprocess.TimeoutExpired:
            sys.exit(f"ranks.py: the job still runs {args.max_seconds} s "
                     f"after SIG{args.signal} to rank {args.rank}:\n" +
                     "".join(lines))
        reader.join(5)
        seconds = time.monotonic() - began
        sys.stdout.write("".join(lines))
        if process.returncode == 0:
            sys.exit("ranks.py: the job exited 0")
        print("exit: non-zero")
        # The launcher is gone; give its kills a moment to land.
        deadline = time.monotonic() + 5
        left = [pid for pid in ranks.values() if pid != victim and alive(pid)]
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [pid for pid in left if alive(pid)]
        print(f"ranks left: {len(left)}")
        print(f"ended {seconds:.1f} s after the signal", file=sys.stderr)
        if left:
            sys.exit(f"ranks.py: ranks still running: {left}")
    finally:
        for pid in signalled:
            for number in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(pid, number)
                except OSError:
                    pass
        if process.poll() is None:
            kill_group(process)
            process.wait()


def losses(path):
    result = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "step" in record:
                result[record["step"]] = record
    return result


def close(args):
    a, b = losses(args.a), losses(args.b)
    steps = sorted(set(a) & set(b))
    if not steps:
        sys.exit("ranks.py: no shared steps")
    worst = 0.0
    for step in steps:
        for key in ("loss", "eval_loss"):
            if key in a[step] or key in b[step]:
                if key not in a[step] or key not in b[step]:
                    sys.exit(f"ranks.py: step {step}: {key} in one file only")
                x, y = a[step][key], b[step][key]
                difference = abs(x - y) / max(abs(x), abs(y))
                worst = max(worst, difference)
                if difference > args.rtol:
                    sys.exit(f"ranks.py: step {step} {key}: {x} vs {y} "
                             f"(relative difference {difference:.2e})")
    print(f"close: steps {steps[0]}-{steps[-1]}, within {args.rtol:g}")
    print(f"largest relative difference {worst:.2e}", file=sys.stderr)


def summary(args):
    with open(args.file) as f:
        records = [json.loads(line) for line in f if line.strip()]
    found = [r for r in records if r.get("summary")]
    if len(found) != 1:
        sys.exit(f"ranks.py: {len(found)} summary records, expected 1")
    ranks = found[0].get("ranks", [])
    if [r.get("rank") for r in ranks] != list(range(args.ranks)):
        sys.exit(f"ranks.py: ranks {ranks}, expected 0..{args.ranks - 1}")
    if not all(r.get("peak_rss_bytes", 0) > 0 for r in ranks):
        sys.exit(f"ranks.py: a rank without its peak memory: {ranks}")
    print(f"summary: {args.ranks} ranks with their peak memory")


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="what", required=True)
    p = commands.add_parser("fails")
    p.add_argument("--max-seconds", type=float, default=60)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = commands.add_parser("fault")
    p.add_argument("--signal", choices=["KILL", "STOP"], required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--after-step", type=int, default=2)
    p.add_argument("--max-seconds", type=float, default=30)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = commands.add_parser("close")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=1e-4)
    p = commands.add_parser("summary")
    p.add_argument("file")
    p.add_argument("--ranks", type=int, required=True)
    args = parser.parse_args()
    if hasattr(args, "command"):
        args.command = (args.command[1:] if args.command[:1] == ["--"]
                        else args.command)
        if not args.command:
            sys.exit("ranks.py: no command")
    {"fails": fails, "fault": fault, "close": close,
     "summary": summary}[args.what](args)


if __name__ == "__main__":
    main()
