#!/usr/bin/env python3
"""Plays the stage functions of a module cut by --dist-pipeline as the
runtime will: sends never wait, a receive waits for the next message from
its peer. Checks that every stream finishes (no deadlock), that each receive
gets the message its peer sent in the same order (same type and label) and
that no message is left over. Prints one line per step function family:

  train_step: 2 stages, 12 messages, all matched

or the first problem, with a non-zero exit.
"""
import re
import sys
from collections import defaultdict, deque

FUNC = re.compile(r"func\.func @(\w+)_stage(\d+)\(")
# The label printed as an attribute ({label = "..."}) or by the ops' own
# syntax (label "...").
SEND = re.compile(r'dist\.send %\S+ to @\w+ \[\w+ = (\d+)\] \{?label(?: =)? "([^"]*)"\}? : (\S+)')
RECV = re.compile(r'dist\.recv from @\w+ \[\w+ = (\d+)\] \{?label(?: =)? "([^"]*)"\}? : (\S+)')


def streams(text):
    families = defaultdict(dict)
    current = None
    for line in text.splitlines():
        match = FUNC.search(line)
        if match:
            current = []
            families[match.group(1)][int(match.group(2))] = current
            continue
        if current is None:
            continue
        match = SEND.search(line)
        if match:
            current.append(("send", int(match.group(1)), match.group(2), match.group(3)))
            continue
        match = RECV.search(line)
        if match:
            current.append(("recv", int(match.group(1)), match.group(2), match.group(3)))
    return families


def play(name, stages):
    count = len(stages)
    if sorted(stages) != list(range(count)):
        return f"{name}: stages {sorted(stages)} are not 0..{count - 1}"
    queues = defaultdict(deque)  # (from, to) -> messages
    position = [0] * count
    messages = 0
    while True:
        moved = False
        for stage in range(count):
            stream = stages[stage]
            while position[stage] < len(stream):
                kind, peer, label, type_ = stream[position[stage]]
                if kind == "send":
                    queues[(stage, peer)].append((label, type_))
                    messages += 1
                else:
                    queue = queues[(peer, stage)]
                    if not queue:
                        break
                    got = queue.popleft()
                    if got != (label, type_):
                        return (f"{name}: stage {stage} receives '{label}' "
                                f"({type_}) but stage {peer} sent '{got[0]}' "
                                f"({got[1]}) first")
                position[stage] += 1
                moved = True
        if all(position[s] == len(stages[s]) for s in range(count)):
            break
        if not moved:
            waiting = [f"stage {s} waits for '{stages[s][position[s]][2]}'"
                       for s in range(count) if position[s] < len(stages[s])]
            return f"{name}: deadlock: " + "; ".join(waiting)
    left = sum(len(q) for q in queues.values())
    if left:
        return f"{name}: {left} messages are never received"
    return None, f"{name}: {count} stages, {messages} messages, all matched"


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    families = streams(text)
    if not families:
        print("no stage functions")
        return 1
    for name in sorted(families):
        result = play(name, families[name])
        if isinstance(result, str):
            print(result)
            return 1
        print(result[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
