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
"""

import argparse
import collections
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--ranks", type=int, default=1)
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


if __name__ == "__main__":
    main()
