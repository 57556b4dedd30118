"""Search the rule palette: the most colours pairwise MIN_DISTANCE apart (CIEDE2000) and from RESERVED.

    python scripts/pick_rule_colors.py

Candidates are a 16-level sRGB grid within LIGHTNESS that keep MIN_DISTANCE from every reserved colour;
from each candidate as a start, greedy farthest-point picking adds the colour farthest from those chosen
while that distance stays >= MIN_DISTANCE. The longest set (first found on ties) is printed, to be
pasted as fuseview.colors.RULE_PALETTE. Takes ~10 s.

Requires: fuseview
"""

from __future__ import annotations

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

from fuseview.colors import LIGHTNESS, MIN_DISTANCE, RESERVED, ciede2000, lab


def candidates() -> list[str]:
    """Grid colours within LIGHTNESS, far enough from every reserved colour."""
    grid = [f"#{r:02x}{g:02x}{b:02x}" for r in range(0, 256, 17) for g in range(0, 256, 17)
            for b in range(0, 256, 17)]
    lo, hi = LIGHTNESS
    return [c for c in grid if lo <= lab(c)[0] <= hi
            and min(ciede2000(lab(c), lab(r)) for r in RESERVED) >= MIN_DISTANCE]


def greedy(free: list[str], start: str, dist: dict[tuple[str, str], float]) -> list[str]:
    """Farthest-point picking from start while the farthest stays MIN_DISTANCE away."""
    chosen = [start]
    near = {c: dist[c, start] for c in free}
    while True:
        best = max(free, key=near.__getitem__)
        if near[best] < MIN_DISTANCE:
            return chosen
        chosen.append(best)
        for c in free:
            near[c] = min(near[c], dist[c, best])


def main() -> None:
    """Print the longest palette found."""
    free = candidates()
    dist = {(a, b): ciede2000(lab(a), lab(b)) for a in free for b in free}
    best: list[str] = []
    for start in free:
        found = greedy(free, start, dist)
        if len(found) > len(best):
            best = found
    print(f"{len(free)} candidate colours; {len(best)} rule colours:")
    print("RULE_PALETTE = (" + ", ".join(f'"{c}"' for c in best) + ")")


if __name__ == "__main__":
    main()
