"""The one dims policy of scan, fuse, profile and the window: what a declared input dim is, and its value.

A declared dim is a number (fixed), a named symbol (`seq`), or unknown: no name, a name that says nothing
(`?`, blanks, onnx's own `unk__N`), or a value of -1 or 0 (as PaddlePaddle and some converters write "any
size"); each unknown is its own dim, so `[-1, 3, "?", "?"]` has three. Every non-fixed dim has a key: its
symbol's name, or `INPUT:AXIS` when it has none. The user sets dims with one syntax everywhere,
`--dim KEY=VALUE` (`--dim seq=64`, `--dim image:0=2`), and only for the model's top-level inputs (If/Loop/Scan
bodies take their shapes from the outer graph); dims left unset take a default by what their name looks like
(batch-like 1, sequence-like 128, a KV cache's past length 1, anything else 1). An unknown key is an error
that lists the valid ones.

A decoder with a KV cache runs with no --dim at all: every past tensor's length is one value (even when the
exporter gave each its own symbol) and the attention mask's length, when it has a symbol of its own, is
past + new tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import onnx

from fuseview.errors import FuseviewError
from fuseview.textsafe import shorten

BATCH_DEFAULT = 1
SEQUENCE_DEFAULT = 128
PAST_DEFAULT = 1  # one cached token: the past inputs and the Concat with them are exercised
OTHER_DEFAULT = 1
MAX_DIM = 2**31 - 1  # onnxruntime's dims are int64, but no tensor is longer than this on one axis

Dim = int | str | None  # a fixed size, a symbol's name, or unknown

_BATCH_WORDS = ("batch",)
_BATCH_NAMES = {"n", "b", "bs", "num_batches"}
_SEQUENCE_WORDS = ("seq", "len", "token", "time", "step")
_SEQUENCE_NAMES = {"s", "t", "l"}
_PAST_WORDS = ("past", "cache")
_PAST_INPUT_WORDS = ("past", "cache", "pkv")
_UNKNOWN_NAME = re.compile(r"\?*|unk__\d+")


def declared_dim(d: onnx.TensorShapeProto.Dimension) -> Dim:
    """A declared dim as fuseview reads it: a positive number, a symbol's name, or None (unknown)."""
    if d.HasField("dim_value") and d.dim_value > 0:
        return int(d.dim_value)
    if d.HasField("dim_param") and not _UNKNOWN_NAME.fullmatch(d.dim_param.strip()):
        return d.dim_param
    return None  # unnamed, "?", unk__N, or -1 / 0 ("any size" in some exporters)


def dim_key(input_name: str, axis: int, dim: Dim) -> str:
    """How the user names a non-fixed dim: the symbol's name, or INPUT:AXIS for an unnamed one."""
    return dim if isinstance(dim, str) else f"{input_name}:{axis}"


def dim_kind(key: str) -> str:
    """What a dim's key says it is: "batch", "past", "sequence", "unnamed" (INPUT:AXIS) or "other"."""
    if re.fullmatch(r".+:\d+", key):
        return "unnamed"
    low = key.lower()
    if any(w in low for w in _BATCH_WORDS) or low in _BATCH_NAMES:
        return "batch"
    if any(w in low for w in _PAST_WORDS):
        return "past"
    if any(w in low for w in _SEQUENCE_WORDS) or low in _SEQUENCE_NAMES:
        return "sequence"
    return "other"


def default_dim(key: str) -> int:
    """The value a dim gets when the user does not set it (batch-like 1, sequence-like 128, past 1, else 1).

    An unnamed dim (key INPUT:AXIS) says nothing about what it is, so it gets 1.
    """
    defaults = {"batch": BATCH_DEFAULT, "sequence": SEQUENCE_DEFAULT, "past": PAST_DEFAULT}
    return defaults.get(dim_kind(key), OTHER_DEFAULT)


def parse_dim_args(items: list[str] | None, label: str = "--dim") -> dict[str, int]:
    """`--dim KEY=VALUE` strings to a dict; FuseviewError on a malformed one (the model is checked later)."""
    out: dict[str, int] = {}
    for item in items or []:
        key, sep, value = str(item).rpartition("=")
        key = key.strip()
        if not sep or not key or any(c.isspace() for c in key):
            raise FuseviewError(
                f"{label} {item!r}: expected NAME=VALUE for a named dim (--dim seq=64)"
                " or INPUT:AXIS=VALUE for an unnamed one (--dim pixel_values:0=2)"
            )
        if not re.fullmatch(r"\s*\+?\d+\s*", value):
            raise FuseviewError(f"{label} {item!r}: VALUE must be a whole number of at least 1")
        if len(value.strip()) > 12:  # int() of a 100,000-digit string is itself slow
            raise FuseviewError(f"{label} {shorten(item, 60)!r}: VALUE must be at most {MAX_DIM}")
        v = int(value)
        if v < 1:
            raise FuseviewError(f"{label} {item!r}: VALUE must be at least 1")
        if v > MAX_DIM:
            raise FuseviewError(f"{label} {item!r}: VALUE must be at most {MAX_DIM}")
        out[key] = v
    return out


def parse_dim_text(text: str) -> dict[str, int]:
    """'seq=128, batch=2' (a text box's form) to a dict, with the same rules as --dim."""
    return parse_dim_args([p for p in text.replace(",", " ").split() if p], label="dims:")


@dataclass(frozen=True)
class DimSlot:
    """One non-fixed dim of a graph input: which input and axis, and its key."""

    input: str
    axis: int
    key: str


def dim_slots(model: onnx.ModelProto) -> list[DimSlot]:
    """Every non-fixed dim of the inputs a caller feeds (initializers excluded), in declaration order."""
    inits = {t.name for t in model.graph.initializer}
    slots = []
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        for axis, d in enumerate(tt.shape.dim):
            dim = declared_dim(d)
            if not isinstance(dim, int):
                slots.append(DimSlot(vi.name, axis, dim_key(vi.name, axis, dim)))
    return slots


def dim_keys(model: onnx.ModelProto) -> list[str]:
    """The keys `--dim` accepts for this model, in declaration order."""
    return list(dict.fromkeys(s.key for s in dim_slots(model)))


def check_dim_names(model: onnx.ModelProto, dims: dict[str, int] | None) -> None:
    """FuseviewError naming the first key the model lacks, with the keys it has."""
    keys = dim_keys(model)
    unknown = [k for k in (dims or {}) if k not in keys]
    if unknown:
        valid = ", ".join(keys) if keys else "none: every input dim is fixed"
        raise FuseviewError(f"--dim {unknown[0]}: the model has no such input dim (valid: {valid})")


@dataclass(frozen=True)
class CacheDims:
    """The dims a KV-cache decoder ties together: the past lengths (one value), the new-token dim, and the
    total lengths (past + new) of masks that carry a symbol of their own."""

    past: tuple[str, ...]
    new: str | None
    total: tuple[str, ...]


def _through_copies(g: onnx.GraphProto, t: str, producers: dict[str, onnx.NodeProto]) -> str:
    """The tensor t copies: back through Identity and one-input Concat nodes (the exporters' cache copies)."""
    for _ in range(8):
        n = producers.get(t)
        if n is None or not (n.op_type == "Identity" or (n.op_type == "Concat" and len(n.input) == 1)):
            return t
        t = n.input[0]
    return t


def _graph_cache(model: onnx.ModelProto) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(past slots, total slots) the graph itself ties: a Concat along the length axis whose first input is a
    graph input copies that input's length as the past (whatever its dims are called), and when the Concat's
    output is a graph output (the present key/value), that output's length is past + new."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    # a cache tensor is [batch, heads, length, head size] with the heads and head size fixed
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in g.input if vi.name not in inits
             and len(vi.type.tensor_type.shape.dim) == 4
             and all(isinstance(declared_dim(vi.type.tensor_type.shape.dim[j]), int) for j in (1, 3))}
    if not ranks:
        return [], []  # no input can be a cache: no Concat below can tie one
    outputs = {vi.name for vi in g.output}
    producers = {o: n for n in g.node for o in n.output[:] if o}
    past: list[tuple[str, int]] = []
    total: list[tuple[str, int]] = []
    for n in g.node:
        if n.op_type != "Concat" or n.domain not in ("", "ai.onnx") or len(n.input) != 2:
            continue
        src = _through_copies(g, n.input[0], producers)
        rank = ranks.get(src)
        axis = next((int(a.i) for a in n.attribute if a.name == "axis"), 0)
        if rank is None or axis % rank != rank - 2 or n.input[1] in ranks:
            continue
        past.append((src, rank - 2))
        if n.output[0] in outputs:
            total.append((n.output[0], rank - 2))
    return past, total


def _output_key(model: onnx.ModelProto, name: str, axis: int) -> str | None:
    vi = next((v for v in model.graph.output if v.name == name), None)
    dims = vi.type.tensor_type.shape.dim if vi is not None else ()
    d = declared_dim(dims[axis]) if axis < len(dims) else None
    return d if isinstance(d, str) else None


def cache_dims(model: onnx.ModelProto) -> CacheDims | None:
    """The KV-cache relations of a decoder's inputs, or None for a model without past inputs.

    The graph says them first: the inputs a Concat of past and new tokens starts from are the past (one
    length), and a present output's declared length, when an input shares its name, is past + new. Names
    fill in what the graph does not tie (a `past*` input no Concat reads, a mask with a symbol of its own)."""
    slots = dim_slots(model)
    by_slot = {(s.input, s.axis): s.key for s in slots}
    graph_past, graph_total = _graph_cache(model)
    batch_keys = {by_slot[(x, 0)] for x, _a in graph_past if (x, 0) in by_slot}
    past = [by_slot[x] for x in graph_past if x in by_slot]
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in model.graph.input}
    # by name, only a cache's length axis ([batch, heads, length, head size]: the one before the last) is
    # the past: onnxruntime-genai's builder names its symbolic head size `kv_cache_dim`
    past += [s.key for s in slots if any(w in s.input.lower() for w in _PAST_INPUT_WORDS)
             and dim_kind(s.key) != "batch" and s.axis != 0 and s.axis == ranks[s.input] - 2]
    if not past:
        return None
    past_set = set(past)
    keys = {s.key for s in slots}
    total = [k for k in (_output_key(model, o, a) for o, a in graph_total) if k in keys and k not in past_set]

    def is_batch(key: str) -> bool:
        return dim_kind(key) == "batch" or key in batch_keys

    ids = [s for s in slots if s.key not in past_set and s.key not in total and not is_batch(s.key)
           and "mask" not in s.input.lower() and "position" not in s.input.lower()]
    new = next((s.key for s in ids if "ids" in s.input.lower() or "embeds" in s.input.lower()),
               ids[0].key if ids else None)
    total += [s.key for s in slots if s.key not in past_set and s.key != new and not is_batch(s.key)
              and ("mask" in s.input.lower() or "total" in s.key.lower())]
    return CacheDims(tuple(dict.fromkeys(past)), new, tuple(dict.fromkeys(total)))


# com.microsoft attention ops: the inputs that are the past key and value
_CACHE_READERS = {"GroupQueryAttention": (3, 4), "MultiHeadAttention": (6, 7)}


def head_size_dims(model: onnx.ModelProto) -> dict[str, int]:
    """Symbolic head sizes of cache inputs that onnxruntime's attention ops read (the builder's
    `kv_cache_dim`), with the value the graph fixes: the query projection's width over the heads."""
    slots = {(s.input, s.axis): s.key for s in dim_slots(model)}
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in model.graph.input}
    out: dict[str, int] = {}
    if not any(axis == 3 and ranks.get(name) == 4 for name, axis in slots):
        return out  # no input a cache could be: the nodes need no walk (most models; resolve_dims runs often)
    widths: _ProjectionWidths | None = None  # made only for a model that needs it (resolve_dims runs often)
    for n in model.graph.node:
        past_at = _CACHE_READERS.get(n.op_type) if n.domain == "com.microsoft" else None
        if past_at is None:
            continue
        caches = [n.input[i] for i in past_at if i < len(n.input) and ranks.get(n.input[i]) == 4
                  and (n.input[i], 3) in slots]
        if not caches:
            continue
        widths = widths or _ProjectionWidths(model)
        size = _head_size(n, widths)
        if size:
            out.update({slots[(c, 3)]: size for c in caches})
    return out


class _ProjectionWidths:
    """The last-axis width of a tensor made by a MatMul with a weight (through a bias Add), else None."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.inits = {t.name: list(t.dims) for t in model.graph.initializer}
        self.producers = {o: n for n in model.graph.node for o in n.output[:] if o}

    def width(self, t: str, depth: int = 0) -> int | None:
        """The width of tensor t's last axis, when a weight's shape says it."""
        n = self.producers.get(t)
        if n is None or depth > 4:
            return None
        if n.op_type == "MatMul" and len(n.input) == 2 and len(self.inits.get(n.input[1], ())) >= 2:
            return int(self.inits[n.input[1]][-1])
        if n.op_type == "Add":
            for x in n.input:
                if len(self.inits.get(x, ())) == 1:
                    return int(self.inits[x][0])
            return next((w for x in n.input if (w := self.width(x, depth + 1))), None)
        return None


def _head_size(n: onnx.NodeProto, widths: _ProjectionWidths) -> int | None:
    attrs = {a.name: int(a.i) for a in n.attribute if a.type == onnx.AttributeProto.INT}
    heads, kv_heads = attrs.get("num_heads", 0), attrs.get("kv_num_heads", attrs.get("num_heads", 0))
    width = widths.width(n.input[0]) if n.input else None
    if heads <= 0 or kv_heads <= 0 or not width or width <= 0:
        return None  # a model that states no usable head count: the dim keeps its default
    packed = len(n.input) < 2 or not n.input[1]  # query, key and value in one tensor
    parts = heads + 2 * kv_heads if packed else heads
    return width // parts if width % parts == 0 else None


def _is_past(name: str) -> bool:
    return "past" in name.lower()


def has_kv_cache(model: onnx.ModelProto) -> bool:
    """True when some input is a cached key/value (the graph concatenates it with the new tokens' key or
    value, or its name says past) with a non-fixed length."""
    return cache_dims(model) is not None or any(_is_past(s.input) for s in dim_slots(model))


def cache_length_dims(model: onnx.ModelProto, past: int, new: int) -> dict[str, int]:
    """Every non-fixed input dim for `past` cached and `new` tokens: the past length (whatever its name, as
    the graph ties it: cache_dims) = past, past + new where the graph or the mask says so,
    batch-like dims 1, the other dims new; FuseviewError if two share a key."""
    cached = has_kv_cache(model)
    rel = cache_dims(model)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in model.graph.input}
    dims: dict[str, int] = {}
    heads = head_size_dims(model)
    for s in dim_slots(model):
        if s.key in heads:
            want = heads[s.key]
        elif rel is not None and s.key in rel.past:
            want = past
        elif rel is not None and s.key in rel.total:
            want = past + new
        elif _is_past(s.input) and s.axis == ranks[s.input] - 2:
            want = past
        elif "mask" in s.input.lower() and s.axis == ranks[s.input] - 1:
            want = past + new if cached else new
        elif dim_kind(s.key) == "batch" or s.axis == 0:
            want = 1
        else:
            want = new
        if dims.setdefault(s.key, want) != want:
            raise FuseviewError(f"dim {s.key} is both {dims[s.key]} and {want} at past {past}, new {new}")
    return dims


DECODE_PAST_DEFAULT = 256  # the cache a decode step is measured over: a length people run, not one token
_ROTARY_CACHES = {"GroupQueryAttention": (7, 8), "RotaryEmbedding": (2, 3)}  # cos_cache, sin_cache inputs
_POSITION_TABLE = re.compile(r"wpe|position|pos_emb|(cos|sin)_cache", re.IGNORECASE)


def position_table(model: onnx.ModelProto) -> int | None:
    """The length of the model's position table (GPT-2's `wpe`, a rotary cos/sin cache) when a Gather reads
    one from the weights; None when none is readable (rotary angles computed in the graph)."""
    inits = {t.name: t for t in model.graph.initializer}
    lengths = [int(inits[n.input[0]].dims[0]) for n in model.graph.node
               if n.op_type == "Gather" and n.input and n.input[0] in inits
               and len(inits[n.input[0]].dims) == 2 and _POSITION_TABLE.search(n.input[0])]
    # onnxruntime's rotary ops read their cos/sin caches whole: a total length beyond them is refused
    lengths += [int(inits[n.input[i]].dims[0]) for n in model.graph.node if n.domain == "com.microsoft"
                for i in _ROTARY_CACHES.get(n.op_type, ()) if i < len(n.input) and n.input[i] in inits
                and inits[n.input[i]].dims]
    return min(lengths) if lengths else None


def decode_step(model: onnx.ModelProto, dims: dict[str, int] | None) -> dict[str, int] | None:
    """The one decode-step rule (tune, profile, sweeps, validation): for a KV-cache decoder whose new-token
    count the user did not set (nor a mask's total length), the dims of one new token over a real cache,
    DECODE_PAST_DEFAULT past tokens capped by the position table (unless the user set the past); None for
    any other model or when the user set the new tokens."""
    cache = cache_dims(model)
    dims = dict(dims or {})
    if cache is None or cache.new is None or cache.new in dims or any(k in dims for k in cache.total):
        return None
    out = {**dims, cache.new: 1}
    if not any(k in dims for k in cache.past):
        table = position_table(model)
        past = DECODE_PAST_DEFAULT if table is None else max(1, min(DECODE_PAST_DEFAULT, table - 1))
        out.update({k: past for k in cache.past})
    return out


@dataclass(frozen=True)
class RunDims:
    """The dims one run uses, resolved once: every non-fixed input dim's value, and the note that says a
    KV-cache decoder is measured at its decode step (None for any other run)."""

    values: dict[str, int]
    note: str | None = None


def run_dims(model: onnx.ModelProto, dims: dict[str, int] | None) -> RunDims:
    """The user's dims resolved once, a KV-cache decoder at its decode step (decode_step) with the note
    that says so; FuseviewError for a key the model lacks."""
    decode = decode_step(model, dims)
    values = resolve_dims(model, decode if decode is not None else dims)
    if decode is None:
        return RunDims(values)
    cache = cache_dims(model)
    assert cache is not None and cache.new is not None
    past_key = cache.past[0]
    past = values[past_key]
    table = position_table(model)
    why = ("set by --dim" if past_key in (dims or {}) else f"the default {DECODE_PAST_DEFAULT}"
           + (f", capped by the position table of {table}" if table is not None and past < DECODE_PAST_DEFAULT
              else ""))
    return RunDims(values, f"a KV-cache decoder: measured at its decode step, {cache.new}=1 new token over a"
                           f" cache of {past} past tokens ({past_key}={past}: {why}); --dim {cache.new}=N"
                           f" measures a prompt of N tokens, --dim {past_key}=N another cache length")


def resolve_dims(model: onnx.ModelProto, dims: dict[str, int] | None = None) -> dict[str, int]:
    """Every non-fixed input dim's key with the value used: the user's, else the default (for a KV-cache
    decoder: one past length for every past input, masks of their own length at past + new)."""
    dims = dict(dims or {})
    check_dim_names(model, dims)
    fixed = head_size_dims(model)
    used = {k: int(dims[k]) if k in dims else fixed.get(k, default_dim(k)) for k in dim_keys(model)}
    cache = cache_dims(model)
    if cache is None:
        return used
    given = [dims[k] for k in cache.past if k in dims]
    past = int(given[0]) if given else PAST_DEFAULT
    for k in cache.past:
        used[k] = int(dims.get(k, past))
    new = used[cache.new] if cache.new else 0
    for k in cache.total:
        if k not in dims:
            used[k] = past + new
    return used
