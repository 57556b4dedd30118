"""The graph scene built from real layouts: keys, colours, level of detail and the overview picture."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter

from fuseview.graph.geometry import group_key, node_key
from fuseview.graph.layout import initial_expansion, layout_graph
from fuseview.graph.loader import load_document
from fuseview.ui import style
from fuseview.ui.graph_scene import OVERVIEW_SCALE, BoxItem, GraphScene, short_shape
from fuseview.ui.graph_view import GraphView
from fuseview.ui.search import find_nodes, nodes_of_op
from tests.conftest import GPT2_MODELS, ONNX_BACKEND_DATA


@pytest.fixture(scope="module")
def gpt2():
    return load_document(GPT2_MODELS / "gpt2_12l_ts13.onnx")


def test_items_carry_layout_keys(qapp, gpt2):
    for expanded in (None, initial_expansion(gpt2.graph, max_boxes=60)):
        lay = layout_graph(gpt2.graph, expanded)
        scene = GraphScene(gpt2.graph, lay)
        assert set(scene.boxes) == {b.key for b in lay.boxes}
        assert set(scene.frames) == {f.key for f in lay.frames}
        assert len(scene.routes) == sum(1 for r in lay.routes if len(r.points) >= 2)
        for key, item in scene.boxes.items():
            assert item.key == key and item.scenePos().x() == item.box.x and item.scenePos().y() == item.box.y


def test_collapsed_layout_draws_groups_and_frames(qapp, gpt2):
    expanded = initial_expansion(gpt2.graph, max_boxes=60)
    scene = GraphScene(gpt2.graph, layout_graph(gpt2.graph, expanded))
    groups = [it for it in scene.boxes.values() if it.box.kind == "group"]
    assert groups and all(it.category == "group" for it in groups)
    assert all(group_key(tuple(it.box.scope)) == it.key for it in groups)
    assert scene.frames, "open groups are outlined by frames"


def test_op_categories_pick_colours(qapp, gpt2):
    scene = GraphScene(gpt2.graph, layout_graph(gpt2.graph, None))
    by_op = {}
    for it in scene.boxes.values():
        if it.box.kind == "node":
            by_op.setdefault(gpt2.graph.nodes[it.box.node].op_type, set()).add(it.category)
    assert by_op["Gemm"] == {"linear"} and by_op["MatMul"] == {"linear"}
    assert by_op["Softmax"] == {"activation"} and by_op["Add"] == {"elementwise"}
    assert by_op["Reshape"] == {"shape"}
    assert style.op_category("SkipLayerNormalization", "com.microsoft") == "custom"
    assert style.op_category("LayerNormalization") == "norm"
    strong = {style.colors(c)[0].name() for c in ("linear", "norm", "activation", "elementwise", "shape")}
    assert len(strong) == 5


class CountingPainter(QPainter):
    """Counts the text the items draw."""

    texts = 0

    def drawText(self, *args):  # noqa: N802 - Qt API
        CountingPainter.texts += 1
        return super().drawText(*args)


def _render(scene: GraphScene, source: QRectF, scale: float) -> tuple[QImage, int]:
    CountingPainter.texts = 0
    img = QImage(
        max(1, int(source.width() * scale)),
        max(1, int(source.height() * scale)),
        QImage.Format.Format_ARGB32_Premultiplied,
    )
    img.fill(QColor(style.BACKGROUND))
    p = CountingPainter(img)
    scene.render(p, QRectF(img.rect()), source)
    p.end()
    return img, CountingPainter.texts


def test_level_of_detail_drops_text_when_zoomed_out(qapp, gpt2):
    lay = layout_graph(gpt2.graph, None)
    scene = GraphScene(gpt2.graph, lay)
    first = next(it for it in scene.boxes.values() if it.box.kind == "node")
    source = first.sceneBoundingRect().adjusted(-200, -200, 200, 200)
    _, texts_near = _render(scene, source, 1.0)
    assert texts_near >= 2  # op type and shape of at least one box
    wide = QRectF(source.x(), source.y(), source.width() * 10, source.height() * 10)
    img, texts_far = _render(scene, wide, 0.1)
    assert texts_far == 0
    assert len({img.pixel(x, y) for x in range(0, img.width(), 4) for y in range(0, img.height(), 4)}) > 2


def test_labels_stay_readable_zoomed_out_where_netron_text_is_tiny(qapp, gpt2):
    lay = layout_graph(gpt2.graph, None)
    scene = GraphScene(gpt2.graph, lay)
    first = next(it for it in scene.boxes.values() if it.box.kind == "node")
    source = first.sceneBoundingRect().adjusted(-400, -400, 400, 400)
    for scale in (0.3, 0.4):  # Netron's 11 px labels are 3.3 and 4.4 px on screen here
        _, texts = _render(scene, source, scale)
        assert texts >= 1
        nodes = [it for it in scene.boxes.values() if it.box.kind == "node"][:50]
        held = [it.held_label(scale) for it in nodes]
        shown = [h for h in held if h is not None]
        assert len(shown) >= len(nodes) * 0.8
        for h, it in zip(held, nodes, strict=True):
            if h is not None:  # the text drawn fits its box (measured, not guessed)
                width = QFontMetricsF(style.font(h[0], True)).horizontalAdvance(h[1])
                assert width <= it.box.w - 11 + 1, (h, it.box.w)
        for px, text in shown:
            # 7 px on screen, or the whole op type shrunk to fit its box (issue 37: "Ma…"), 4 px at least
            assert px * scale >= 7.0 or (px * scale >= 4.0 - 0.3 and "…" not in text), (px, text)
            assert len(text.rstrip("…")) >= (2 if scale < 0.35 else 3)


def test_overview_picture_replaces_items_when_far_out(qapp, gpt2):
    scene = GraphScene(gpt2.graph, layout_graph(gpt2.graph, None))
    scene.use_zoom(OVERVIEW_SCALE / 4)
    assert scene.overview.isVisible()
    assert not any(it.isVisible() for it in scene.boxes.values())
    img = scene.draw_overview(0.02)
    assert not img.isNull() and img.height() > 50
    colours = {img.pixel(x, y) for x in range(0, img.width(), 2) for y in range(0, img.height(), 7)}
    assert len(colours) > 3  # background, edges and several op colours
    scene.use_zoom(1.0)
    assert not scene.overview.isVisible() and all(it.isVisible() for it in scene.boxes.values())


def test_highlight_and_selection_by_key(qapp, gpt2):
    scene = GraphScene(gpt2.graph, layout_graph(gpt2.graph, None))
    from fuseview.graph.geometry import node_key

    gemms = [node_key(i) for i in nodes_of_op(gpt2.graph, "Gemm")]
    assert scene.set_highlight(gemms) == len(gemms) == 48
    assert set(scene.highlighted_keys()) == set(gemms)
    scene.select_keys(gemms[:2])
    assert set(scene.selected_keys()) == set(gemms[:2])
    active = [r for r in scene.routes if r.pen().color() == QColor(style.EDGE_ACTIVE)]
    touching = {r for r in scene.routes if r.route.src in gemms[:2] or r.route.dst in gemms[:2]}
    assert set(active) == touching and active


def test_search_on_a_cnn():
    doc = load_document(ONNX_BACKEND_DATA / "light" / "light_squeezenet.onnx")
    g = doc.graph
    concats = find_nodes(g, "concat")
    assert concats == [n.index for n in g.nodes if n.op_type == "Concat"]
    x = g.inputs[0]
    assert find_nodes(g, x) == sorted(set(g.tensors[x].consumers))
    assert find_nodes(g, "") == [] and find_nodes(g, "no-such-thing-anywhere") == []


def test_short_shape():
    assert short_shape(("batch", "unk__12", 768)) == "[batch, ?, 768]"
    assert short_shape(None) == "?"
    assert short_shape(()) == "[]"


def test_box_items_are_selectable_and_keyed(qapp, gpt2):
    scene = GraphScene(gpt2.graph, layout_graph(gpt2.graph, None))
    item = next(iter(scene.boxes.values()))
    assert isinstance(item, BoxItem)
    assert item.flags() & BoxItem.GraphicsItemFlag.ItemIsSelectable
    assert item.flags() & BoxItem.GraphicsItemFlag.ItemUsesExtendedStyleOption


def _picture(scene: GraphScene, scale: float) -> QImage:
    rect = scene.sceneRect()
    img = QImage(
        max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)), QImage.Format.Format_RGB32
    )
    img.fill(QColor("white"))
    painter = QPainter(img)
    scene.render(painter, QRectF(img.rect()), rect)
    painter.end()
    return img


def test_sliced_build_ends_as_the_one_go_scene(qapp, gpt2):
    # the window adds a big layout's items in time slices; switching level of detail mid-build must not
    # lose, duplicate or hide anything
    lay = layout_graph(gpt2.graph, None)
    whole = GraphScene(gpt2.graph, lay)
    sliced = GraphScene(gpt2.graph, lay, incremental=True)
    assert sliced.building and not sliced.boxes
    steps = 0
    while not sliced.build_some(0.002):
        steps += 1
        if steps == 2:
            sliced.use_zoom(0.01)  # overview picture on while items are still arriving
        if steps == 4:
            sliced.use_zoom(1.0)
    assert steps > 4 and not sliced.building
    assert sliced.counts() == whole.counts()
    assert all(item.isVisible() for item in sliced.boxes.values())
    for scale in (1.0, 0.05):
        sliced.use_zoom(scale)
        whole.use_zoom(scale)
        assert _picture(sliced, 0.2) == _picture(whole, 0.2)


def test_a_lazy_scene_draws_what_the_eager_one_draws(qapp, gpt2):
    # a lazy scene makes items only where a view paints; overlays set by key before show on them, and an
    # export (whole) is the eager scene's picture
    lay = layout_graph(gpt2.graph, None)
    gemms = [node_key(i) for i in nodes_of_op(gpt2.graph, "Gemm")]
    eager, lazy = GraphScene(gpt2.graph, lay), GraphScene(gpt2.graph, lay, lazy=True)
    pictures = []
    for scene in (eager, lazy):
        scene.set_highlight(gemms[::2])
        scene.set_marks({gemms[1]: QColor("#d62728")})
        scene.set_heatmap({gemms[3]: 1.0, gemms[5]: 0.5})
        scene.set_focus(gemms[1:2])
        scene.select_keys(gemms[:1])
        view = GraphView()
        view.resize(900, 700)
        view.setScene(scene)
        view.set_zoom(0.8)
        view.centerOn(scene.keys_rect(gemms[:4]).center())
        pictures.append(view.grab().toImage())
    assert lazy.made_counts()["boxes"] < len(lay.boxes) // 10 == eager.made_counts()["boxes"] // 10
    assert pictures[0] == pictures[1]
    assert lazy.counts() == eager.counts() and lazy.marked_keys() == eager.marked_keys()
    assert _picture(lazy.whole(), 0.2) == _picture(eager, 0.2)


def test_the_overview_reads_every_route_from_one_stream(qapp, gpt2):
    # a lazy scene's overview draws its edges as one path read from arrays, the same points as the routes
    from fuseview.graph.geometry import Layout, Route
    from fuseview.ui.scene_index import SceneIndex
    from fuseview.ui.scene_overview import _routes_path

    routes = [Route("a", "b", "t", ((0, 0), (10, 5), (20, 30))), Route("a", "c", "u", ((100, 1), (50, 2))),
              Route("x", "y", "z", ((1, 1),))]  # one point: not drawn
    path = _routes_path(SceneIndex(Layout([], routes)))
    got = [(e.type.value, e.x, e.y) for e in map(path.elementAt, range(path.elementCount()))]
    assert got == [(0, 0, 0), (1, 10, 5), (1, 20, 30), (0, 100, 1), (1, 50, 2)]
    assert _routes_path(SceneIndex(Layout([], routes[2:]))).isEmpty()
    lay = layout_graph(gpt2.graph, None)
    whole = _routes_path(SceneIndex(lay))
    assert whole.elementCount() == sum(len(r.points) for r in lay.routes if len(r.points) >= 2)
