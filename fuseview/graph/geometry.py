"""What a layout produces: boxes, edge routes and group frames in scene coordinates (no Qt)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

BoxKind = Literal["node", "input", "output", "group"]
Point = tuple[float, float]


def node_key(index: int) -> str:
    """Box key of a graph node."""
    return f"n:{index}"


def input_key(tensor: str) -> str:
    """Box key of a graph input."""
    return f"in:{tensor}"


def output_key(tensor: str) -> str:
    """Box key of a graph output."""
    return f"out:{tensor}"


def group_key(scope: tuple[str, ...]) -> str:
    """Box (or frame) key of a name-scope group."""
    return "g:" + "/".join(scope)


@dataclass(frozen=True)
class Box:
    """A drawn rectangle: a node, a graph input/output, or a collapsed group. x, y is the top-left corner."""

    key: str
    kind: BoxKind
    x: float
    y: float
    w: float
    h: float
    label: str  # op type, tensor name, or group name
    sublabel: str = ""  # node name, shape, or "124 nodes"
    node: int | None = None  # node index for kind == "node"
    scope: tuple[str, ...] = ()  # group path for kind == "group"; node scope otherwise

    @property
    def center(self) -> Point:
        """Centre of the box."""
        return (self.x + self.w / 2, self.y + self.h / 2)


@dataclass(frozen=True)
class Route:
    """An edge drawn as a polyline from the bottom of src to the top of dst.

    A stub is an edge from a high fan-out source that is drawn as a short tick at the consumer, with
    the source's label, instead of being routed across the graph.
    """

    src: str  # box key
    dst: str  # box key
    tensor: str  # tensor name; for edges between groups, the first tensor plus a count
    points: tuple[Point, ...]
    stub: bool = False
    count: int = 1  # how many tensors this route stands for (edges into/out of collapsed groups)


@dataclass(frozen=True)
class Frame:
    """The outline of an expanded group around its children."""

    key: str
    scope: tuple[str, ...]
    x: float
    y: float
    w: float
    h: float
    label: str


@dataclass
class Layout:
    """A complete drawing of one graph at one expansion state."""

    boxes: list[Box]
    routes: list[Route]
    frames: list[Frame] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0

    def box_by_key(self) -> dict[str, Box]:
        """Boxes indexed by key."""
        return {b.key: b for b in self.boxes}
