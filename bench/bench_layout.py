"""Layout speed on real GPT-2 exports: flat, collapsed top level, and opening one group.

For each model prints: nodes, visible nodes, boxes/routes/dummy vertices/layers of the flat layout, and
best-of-3 seconds for loading, the flat layout, the collapsed top level (initial_expansion, from cold:
no memoised scope tree or group layouts) and opening one group from there (a block in the middle of the
model; group layouts of the unchanged siblings come from the cache); then one JSON line with every figure.

    python bench/bench_layout.py [MODEL.onnx ...]

Without arguments it measures every model in ../shared/models and assets/models.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuseview.graph.groups import forget  # noqa: E402
from fuseview.graph.layout import LayoutStats, initial_expansion, layout_graph  # noqa: E402
from fuseview.graph.loader import load_document  # noqa: E402

DEFAULT_DIRS = [ROOT.parent / "shared" / "models", ROOT / "assets" / "models"]


def best_of(n: int, fn):
    """Smallest wall time of n calls, and the last result."""
    best = float("inf")
    result = None
    for _ in range(n):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def measure(path: Path, repeat: int) -> dict:
    """Every figure for one model."""
    t_load, doc = best_of(repeat, lambda: load_document(path))
    g = doc.graph
    visible = len(g.visible_nodes())
    stats = LayoutStats()
    t_flat, flat = best_of(repeat, lambda: layout_graph(g, stats=stats))
    collapsed = initial_expansion(g)
    if collapsed is None:  # small graph: opens flat; measure its collapsed form anyway
        collapsed = initial_expansion(g, max_boxes=max(visible - 1, 0)) or frozenset({()})

    def cold_collapsed():
        forget(g)  # as on first opening: no scope tree, no cached group layouts
        return layout_graph(g, collapsed)

    t_coll, coll = best_of(repeat, cold_collapsed)
    groups = [b for b in coll.boxes if b.kind == "group"]
    row = {
        "model": path.name,
        "nodes": len(g.nodes),
        "visible": visible,
        "boxes": len(flat.boxes),
        "routes": len(flat.routes),
        "stubs": sum(r.stub for r in flat.routes),
        "dummies": stats.dummies,
        "layers": stats.layers,
        "load_s": round(t_load, 4),
        "flat_s": round(t_flat, 4),
        "collapsed_boxes": len(coll.boxes),
        "collapsed_s": round(t_coll, 4),
        "open_group": None,
        "open_boxes": None,
        "open_s": None,
    }
    if groups:
        # a block in the middle of the model, as a user would open it; else the largest group
        blocks = [b for b in groups if b.label.startswith("h.")]
        target = blocks[len(blocks) // 2] if blocks else max(groups, key=lambda b: int(b.sublabel.split()[0]))
        opened = collapsed | {target.scope}

        def open_one():
            forget(g)
            layout_graph(g, collapsed)  # the top level is on screen; time the click that opens one group
            t = time.perf_counter()
            lay = layout_graph(g, opened)
            return time.perf_counter() - t, lay

        t_open = min(open_one()[0] for _ in range(repeat))
        lay = layout_graph(g, opened)
        row.update(open_group="/".join(target.scope), open_boxes=len(lay.boxes), open_s=round(t_open, 4))
    return row


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    paths = args.models or sorted(p for d in DEFAULT_DIRS if d.is_dir() for p in d.glob("*.onnx"))
    if not any("96l" in p.name for p in paths) and not args.models:
        print("note: no 96-layer model (scripts/export_models.py makes assets/models/gpt2_96l_ts13.onnx)")
    rows = []
    header = (
        f"{'model':24} {'nodes':>6} {'visible':>7} {'boxes':>6} {'routes':>6} {'stubs':>5} {'dummies':>7} "
        f"{'layers':>6} {'load s':>7} {'flat s':>7} {'top s':>7} {'top box':>7} {'open s':>7} {'open box':>8}"
    )
    print(header)
    for p in paths:
        r = measure(p, args.repeat)
        rows.append(r)
        open_s = f"{r['open_s']:7.3f}" if r["open_s"] is not None else f"{'-':>7}"
        open_b = f"{r['open_boxes']:8d}" if r["open_boxes"] is not None else f"{'-':>8}"
        print(
            f"{r['model']:24} {r['nodes']:6d} {r['visible']:7d} {r['boxes']:6d} {r['routes']:6d} "
            f"{r['stubs']:5d} {r['dummies']:7d} {r['layers']:6d} {r['load_s']:7.3f} {r['flat_s']:7.3f} "
            f"{r['collapsed_s']:7.3f} {r['collapsed_boxes']:7d} {open_s} {open_b}",
            flush=True,
        )
    print(json.dumps({"bench": "layout", "repeat": args.repeat, "results": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
