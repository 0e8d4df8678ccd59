#!/usr/bin/env python3
"""Checks every relative link of README.md and docs/**/*.md: the file it
points to exists and, for a link to a Markdown heading (page.md#anchor or
#anchor), that the page has a heading with that GitHub anchor.

Usage: check_links.py ROOT  (the repository root). Prints one line per
broken link, `FILE:LINE: error: ...`, and exits 1 if there is any.
"""
import os
import re
import sys

# [text](target) and ![alt](target); the target ends at whitespace or ')'.
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<(?:a|img)\s[^>]*(?:href|src)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def github_anchor(heading):
    """GitHub's heading id: lower case, markup and punctuation dropped
    (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def scan(path):
    """Yields (line number, target) of each link outside code, and returns
    the set of the page's anchors through the cache below."""
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence or line.startswith("    "):
                continue
            text = CODE_SPAN.sub("", line)
            for match in LINK.finditer(text):
                yield number, match.group(1)
            for match in HTML_LINK.finditer(text):
                yield number, match.group(1)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen, in_fence = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    in_fence = not in_fence
                    continue
                match = None if in_fence else HEADING.match(line)
                if match:
                    anchor = github_anchor(match.group(2))
                    count = seen.get(anchor, 0)
                    seen[anchor] = count + 1
                    found.add(anchor if count == 0 else f"{anchor}-{count}")
        _anchors[path] = found
    return _anchors[path]


def pages(root):
    yield os.path.join(root, "README.md")
    for folder, _, files in os.walk(os.path.join(root, "docs")):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def main():
    if len(sys.argv) != 2:
        print("usage: check_links.py ROOT", file=sys.stderr)
        return 2
    root = sys.argv[1]
    errors = checked = 0
    for page in pages(root):
        shown = os.path.relpath(page, root)
        for number, target in scan(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            resolved = (page if not path else
                        os.path.normpath(os.path.join(os.path.dirname(page), path)))
            if not os.path.exists(resolved):
                print(f"{shown}:{number}: error: link to {target}: "
                      f"{os.path.relpath(resolved, root)} does not exist")
                errors += 1
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                print(f"{shown}:{number}: error: link to {target}: "
                      f"{os.path.relpath(resolved, root)} has no heading "
                      f"with anchor #{anchor}")
                errors += 1
    print(f"check_links: {checked} relative links, {errors} broken")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
