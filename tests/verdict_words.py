"""Issue 37.4: a text's faster/slower words must follow the verdict of the interval beside them.

A block (a kernel's lines in `trace`, a line or row elsewhere) that holds an interval saying "cannot tell"
or "no difference" must not also say "1.1x slower" / "faster than" of its own; every quoted interval's
word must be stats.verdict's for its ends."""

from __future__ import annotations

import re

from fuseview.stats import verdict

INTERVAL = re.compile(r"(\d+(?:\.\d+)?)x \[(\d+(?:\.\d+)?), (\d+(?:\.\d+)?)\] (faster|slower|no difference|"
                      r"cannot tell)")
# a claim of its own: "1.1x slower", "faster than" (not "not measured faster than both", a negation)
BARE = re.compile(r"\b(?:\d+(?:\.\d+)?x (?:faster|slower)|(?<!not measured )(?:faster|slower) than)\b")


def contradictions(block: str, threshold: float = 0.02) -> list[str]:
    """What in a block contradicts its intervals (empty: it reads as its figures say)."""
    bad = []
    words = set()
    for _r, lo, hi, word in INTERVAL.findall(block):
        words.add(word)
        if verdict(float(lo), float(hi), threshold) != word:
            bad.append(f"[{lo}, {hi}] is not {word!r}")
    undecided = words and not words & {"faster", "slower"}
    claims = BARE.findall(INTERVAL.sub("", block))
    if undecided and claims:
        bad.append(f"{claims} beside an interval that says {sorted(words)}")
    return bad


def kernel_blocks(text: str) -> list[str]:
    """The `trace` summary cut into blocks: one per kernel (`  [F/C] name` and its indented lines)."""
    blocks, cur = [], []
    for line in text.splitlines():
        if re.match(r"^  \[\d+/\d+\] ", line) or not line.startswith("    "):
            if cur:
                blocks.append("\n".join(cur))
            cur = []
        cur.append(line)
    if cur:
        blocks.append("\n".join(cur))
    return blocks


def assert_words_follow_intervals(blocks: list[str], threshold: float = 0.02) -> None:
    """Fail naming the first block whose words contradict its intervals."""
    for b in blocks:
        bad = contradictions(b, threshold)
        assert not bad, f"{bad}\n{b}"
