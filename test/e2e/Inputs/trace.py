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
compute.
"""

import argparse
import collections
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--overlap", action="store_true")
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


def overlap(spans):
    """The started collectives (communication track), and of their total
    time how much ran while a kernel of the instruction track ran."""
    started = [s for s in spans if s["tid"] == 2]
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
