#!/usr/bin/env python3
"""Checks a partition-run --trace file (Chrome / Perfetto trace events).

  trace.py FILE [--ranks N]

Fails unless FILE parses as JSON with a traceEvents list, has a named
process (track) for each of the N ranks, and every complete event ("ph":
"X") has a name, a pid, a non-negative start and duration. Prints, per
rank, its name, the number of spans of each category and, for each send
and receive label, its bytes and the count, sorted, so that FileCheck can
match them; then the longest receive wait on each rank as "waits: yes"
when some receive's span is longer than zero.

With --overlap, also per rank the started collectives of its communication
track (tid 2): how many, and whether any of them ran while the rank was
computing ("overlaps compute: yes" when some started collective's span
overlaps a kernel span of the same step on the instruction track), then the
share of their time hidden behind kernels (a measurement, printed for the
benchmarks, not for FileCheck), and per kind of collective (all_reduce,
reduce_scatter, all_gather) how many started and whether they overlap
compute, and how many a later step than their start's waited for (the
CPU backend carries a function's trailing waits into its next run).

With --offload, per rank the offload's tier copies (tier_read and
tier_write, category "tier copy"): how many per step and their bytes, and
the time the rank was blocked in their waits per step (each wait's span
names what it waits for), the exposed part of the offload's I/O: printed
as "blocked in tier waits: yes" for FileCheck and in milliseconds per step
(steps after the first) for the benchmarks.

With --waits, per rank the time blocked in the waits of started
collectives (steps after the first), as "blocked in collective waits: yes"
for FileCheck and in milliseconds per step, then the largest shares (--top,
5) by collective, a ZeRO bucket's per-tensor collectives together (the
label without its " #i"), each marked "running" when the communication
thread had begun it before the wait began and "queued" when it was still
behind earlier collectives: where a step's exposed communication goes.

With --tiers, also per rank the offload's tier copies of its tier track
(tid 3, from each copy's start to its wait's return): how many reads and
writes and their bytes per step, and whether any of them ran while the
rank computed ("overlaps compute: yes" when some copy's span overlaps a
kernel span of the instruction track).
"""

import argparse
import collections
import json
import re
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--overlap", action="store_true")
    parser.add_argument("--offload", action="store_true")
    parser.add_argument("--tiers", action="store_true")
    parser.add_argument("--waits", action="store_true")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    with open(args.file) as f:
        document = json.load(f)
    events = document.get("traceEvents")
    if not isinstance(events, list):
        sys.exit("trace.py: no traceEvents list")
    names = {}
    spans = collections.defaultdict(list)
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            names[event["pid"]] = event["args"]["name"]
        elif event.get("ph") == "X":
            for key in ("name", "pid", "tid", "ts", "dur", "cat"):
                if key not in event:
                    sys.exit(f"trace.py: a span without {key}: {event}")
            if event["dur"] < 0 or event["ts"] < -1e6:
                sys.exit(f"trace.py: a span with a bad time: {event}")
            spans[event["pid"]].append(event)
    if sorted(names) != list(range(args.ranks)):
        sys.exit(f"trace.py: tracks {sorted(names)}, expected ranks "
                 f"0..{args.ranks - 1}")
    for rank in range(args.ranks):
        categories = collections.Counter(s["cat"] for s in spans[rank])
        print(f"rank {rank}: {names[rank]}: " + ", ".join(
            f"{c} {categories[c]}" for c in sorted(categories)))
        transfers = collections.Counter(
            (s["cat"], s["args"].get("label", ""), s["args"].get("bytes", 0))
            for s in spans[rank] if s["cat"] in ("send", "recv"))
        for (category, label, size), count in sorted(transfers.items()):
            print(f"rank {rank}: {category} '{label}' {size} bytes x{count}")
        waits = [s["dur"] for s in spans[rank] if s["cat"] == "recv"]
        if waits:
            print(f"rank {rank}: receive waits: "
                  f"{'yes' if max(waits) > 0 else 'no'}")
        if args.tiers:
            copies = [s for s in spans[rank] if s["tid"] == 3]
            steps = len({s["args"].get("step") for s in copies}) or 1
            for kind in ("tier_read", "tier_write"):
                mine = [s for s in copies if s["name"].startswith(kind)]
                size = sum(s["args"].get("bytes", 0) for s in mine)
                print(f"rank {rank}: tier track: {kind} "
                      f"{len(mine) // steps} per step, {size // steps} "
                      f"bytes per step")
            _, hidden, _ = overlap(spans[rank], track=3)
            print(f"rank {rank}: tier copies overlap compute: "
                  f"{'yes' if hidden > 0 else 'no'}")
        if args.overlap:
            started, hidden, total = overlap(spans[rank])
            print(f"rank {rank}: communication track: {len(started)} started "
                  f"collectives, overlaps compute: "
                  f"{'yes' if hidden > 0 else 'no'}")
            share = 100.0 * hidden / total if total > 0 else 0.0
            print(f"rank {rank}: hidden {share:.1f}% of {total / 1e3:.1f} ms "
                  f"of started collectives")
            # By kind (the span's name begins with it): ZeRO starts both a
            # reduce-scatter and an all-gather per bucket.
            kinds = collections.defaultdict(list)
            for s in started:
                kinds[s["name"].split(" ")[0]].append(s)
            for kind in sorted(kinds):
                _, kind_hidden, _ = overlap(
                    kinds[kind] + [s for s in spans[rank] if s["tid"] == 0])
                print(f"rank {rank}: started {kind}: {len(kinds[kind])}, "
                      f"overlaps compute: "
                      f"{'yes' if kind_hidden > 0 else 'no'}")
            print(f"rank {rank}: waited for in a later step than started: "
                  f"{carried(spans[rank])}")
        if args.offload:
            offload(rank, spans[rank])
        if args.waits:
            total, steps, groups = collective_waits(spans[rank])
            print(f"rank {rank}: blocked in collective waits: "
                  f"{'yes' if total > 0 else 'no'}")
            print(f"rank {rank}: blocked {total / 1e3 / steps:.1f} ms per "
                  f"step in collective waits (steps after the first)")
            for (group, state), time in groups.most_common(args.top):
                print(f"rank {rank}:   {time / 1e3 / steps:.1f} ms per step: "
                      f"{group} ({state})")


def offload(rank, spans):
    """The tier copies of `spans` per step, and the time blocked in their
    waits (the exposed I/O)."""
    # (The instruction track's starts; the tier track repeats each copy.)
    copies = [s for s in spans if s["cat"] == "tier copy" and s["tid"] == 0]
    waits = [s for s in spans if s["cat"] == "wait" and
             s["name"].split(" ")[2:3] in (["tier_read"], ["tier_write"])]
    steps = sorted({s["args"].get("step", 0) for s in copies})
    for kind in ("tier_read", "tier_write"):
        mine = [s for s in copies if s["name"].startswith(kind)]
        per_step = len(mine) // max(1, len(steps))
        size = sum(s["args"].get("bytes", 0) for s in mine) // max(1, len(steps))
        print(f"rank {rank}: {kind}: {per_step} per step, {size} bytes")
    print(f"rank {rank}: blocked in tier waits: "
          f"{'yes' if any(w['dur'] > 0 for w in waits) else 'no'}")
    later = [s for s in steps if s > steps[0]] if steps else []
    blocked = sum(w["dur"] for w in waits
                  if w["args"].get("step", 0) in later)
    print(f"rank {rank}: blocked {blocked / 1e3 / max(1, len(later)):.1f} ms "
          f"per step in tier waits (steps after the first)")


COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def collective_waits(spans):
    """The waits of started collectives (instruction track) in the steps
    after the first: their total time, the number of those steps, and their
    time by (collective label without its tensor index, "running" or
    "queued"). A wait's collective is the last span of its label on the
    communication track (tid 2) that began before the wait ended (a carried
    wait's began in the step before); "queued" when that span began after
    the wait did (the thread was still running earlier collectives)."""
    runs = collections.defaultdict(list)
    for s in spans:
        if s["tid"] == 2:
            runs[s["name"]].append(s)
    for spans_of_label in runs.values():
        spans_of_label.sort(key=lambda s: s["ts"])
    waits = [s for s in spans if s["tid"] == 0 and s["cat"] == "wait" and
             s["args"].get("label", "").split(" ")[0] in COLLECTIVES]
    steps = sorted({s["args"].get("step", 0) for s in waits})
    later = set(steps[1:]) or set(steps)
    groups = collections.Counter()
    total = 0.0
    for wait in waits:
        if wait["args"].get("step", 0) not in later:
            continue
        label = wait["args"]["label"]
        started = None
        for run in runs.get(label, []):
            if run["ts"] > wait["ts"] + wait["dur"]:
                break
            started = run
        state = ("queued" if started is not None and started["ts"] > wait["ts"]
                 else "running")
        group = re.sub(r" #\d+$", "", label)
        groups[(group, state)] += wait["dur"]
        total += wait["dur"]
    return total, max(1, len(later)), groups


def carried(spans):
    """How many started collectives a later step waited for: a wait's span
    (instruction track) whose collective's last start before it (same
    name, instruction track) was in an earlier step."""
    track = sorted((s for s in spans if s["tid"] == 0), key=lambda s: s["ts"])
    last_start = {}
    count = 0
    for s in track:
        if s["cat"] == "wait":
            name = s["name"].split(" ", 2)[2] if s["name"].count(" ") >= 2 else ""
            started = last_start.pop(name, None)
            if started is not None and \
                    s["args"].get("step", 0) > started["args"].get("step", 0):
                count += 1
        elif s["cat"] == "collective":
            last_start[s["name"]] = s
    return count


def overlap(spans, track=2):
    """The started collectives (communication track; or the spans of
    another track), and of their total time how much ran while a kernel of
    the instruction track ran."""
    started = [s for s in spans if s["tid"] == track]
    kernels = sorted((s["ts"], s["ts"] + s["dur"]) for s in spans
                     if s["tid"] == 0 and s["cat"] == "kernel")
    hidden = total = 0.0
    for s in started:
        begin, end = s["ts"], s["ts"] + s["dur"]
        total += end - begin
        for k_begin, k_end in kernels:
            if k_begin >= end:
                break
            hidden += max(0.0, min(end, k_end) - max(begin, k_begin))
    return started, hidden, total


if __name__ == "__main__":
    main()
