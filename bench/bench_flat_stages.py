"""Where a flat (Expand all) big graph's time goes: each stage timed alone, in CPU seconds, for one tree.

    QT_QPA_PLATFORM=offscreen PYTHONPATH=TREE python bench/bench_flat_stages.py [--nodes 50000] [--kind chain]

TREE is the fuseview tree to time (this one, or a copy of main: `git worktree add --detach DIR main`); the
model is made by this tree's tests/big_graphs.py. Stages: reading the model, the flat layout, the edge paths
the window's worker builds beside it, the scene's items, Qt's index (setScene and the first item lookup),
and the first paint of a 1120x800 view fitted to the graph. Prints one line, with the Qt items made.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=50_000)
    p.add_argument("--kind", default="chain")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))  # tests.big_graphs of this tree; fuseview comes from PYTHONPATH
    from tests.big_graphs import write_big_model

    sys.path.pop(0)
    import fuseview
    from fuseview.graph.layout import layout_graph
    from fuseview.graph.loader import load_document

    out: dict[str, float] = {}

    def timed(name: str, fn):
        t = time.process_time()
        result = fn()
        out[name] = time.process_time() - t
        return result

    with tempfile.TemporaryDirectory(prefix="fuseview-stages-") as folder:
        path = write_big_model(Path(folder), args.nodes, args.kind)
        doc = timed("read", lambda: load_document(path))
    lay = timed("layout", lambda: layout_graph(doc.graph, None))
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    import fuseview.ui.graph_scene as gs
    from fuseview.ui.graph_view import GraphView

    lazy = hasattr(gs, "layout_paths")  # a tree from before the lazy scene builds every item
    paths = timed("edge paths", lambda: gs.layout_paths(lay) if lazy else gs.route_paths(lay))
    extra = {"lazy": gs.is_big(lay)} if lazy else {}
    scene = timed("items", lambda: gs.GraphScene(doc.graph, lay, paths=paths, **extra))
    view = GraphView()
    view.resize(1120, 800)
    view.show()
    app.processEvents()
    timed("index", lambda: (view.setScene(scene), scene.items(view.visible_scene_rect())))
    timed("first paint", lambda: (view.fit(), view.viewport().repaint()))
    tree = Path(fuseview.__file__).resolve().parent.parent
    print(f"{tree} {args.kind}{args.nodes}: " + ", ".join(f"{k} {v:.2f}" for k, v in out.items())
          + f" CPU s; {len(scene.items()):,} Qt items")
    return 0


if __name__ == "__main__":
    sys.exit(main())
