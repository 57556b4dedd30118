"""Bounded reading of user files: regular files only, size-checked before reading, JSON depth bounded.

Models (and their external data) are registered as inputs of the run, so the guarded writer
(fuseview.atomic) never replaces them, in the CLI and in the window alike; the CLI also registers every
file named on its command line. A plan or report opened in the window may be saved back over itself.
Limits are generous defaults, each overridable by an environment variable.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zipfile
from pathlib import Path

from fuseview.atomic import register_input
from fuseview.errors import FuseviewError
from fuseview.textsafe import shorten

MiB = 1 << 20
GiB = 1 << 30

# kind -> (default limit in bytes, environment variable that overrides it)
LIMITS: dict[str, tuple[int, str]] = {
    "model": (2 * GiB, "FUSEVIEW_MAX_MODEL_BYTES"),  # protobuf cannot parse more in one piece
    "plan": (64 * MiB, "FUSEVIEW_MAX_PLAN_BYTES"),
    "report": (256 * MiB, "FUSEVIEW_MAX_REPORT_BYTES"),
    "trace": (2 * GiB, "FUSEVIEW_MAX_TRACE_BYTES"),
    "inputs": (1 * GiB, "FUSEVIEW_MAX_NPZ_BYTES"),  # an .npz: the sum of its uncompressed arrays
    "json": (256 * MiB, "FUSEVIEW_MAX_JSON_BYTES"),
}
MAX_JSON_DEPTH = 64
MAX_LIMIT = 1 << 40  # 1 TiB: no limit a variable sets may exceed it


def limit(kind: str) -> int:
    """The size limit in bytes for a kind of file (its environment variable wins when set to a number)."""
    default, env = LIMITS[kind]
    raw = os.environ.get(env, "").strip()
    if raw:
        try:
            value = int(float(raw))
        except (ValueError, OverflowError):  # OverflowError: 1e400 is inf
            raise FuseviewError(f"{env}={shorten(raw, 40)}: not a number of bytes") from None
        if value > MAX_LIMIT:
            raise FuseviewError(f"{env}={shorten(raw, 40)}: over {_human(MAX_LIMIT)}, the most allowed")
        if value > 0:
            return value
    return default


def _human(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def check_regular(path: str | os.PathLike, kind: str, what: str | None = None) -> os.stat_result:
    """stat a file to be read: FuseviewError unless it is a regular file within the kind's size limit."""
    p = Path(path)
    what = what or kind
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise FuseviewError(f"{p}: {what} not found (no such file)") from None
    except OSError as exc:
        raise FuseviewError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise FuseviewError(f"{p}: is a folder, not a {what} file")
    if not stat.S_ISREG(st.st_mode):
        kind_name = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise FuseviewError(f"{p}: is {kind_name}, not a regular {what} file")
    cap = limit(kind)
    if st.st_size > cap:
        raise FuseviewError(
            f"{p}: {_human(st.st_size)} is over the {_human(cap)} limit for a {what} file"
            f" (set {LIMITS[kind][1]} to raise it)"
        )
    if kind == "model":
        register_input(p)
    return st


def read_bytes(path: str | os.PathLike, kind: str, what: str | None = None) -> bytes:
    """The bytes of a regular file within its kind's limit (never more than the limit, even if it grows)."""
    check_regular(path, kind, what)
    cap = limit(kind)
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        raise FuseviewError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > cap:
        raise FuseviewError(f"{path}: grew past the {_human(cap)} limit while being read")
    return data


def read_text(path: str | os.PathLike, kind: str, what: str | None = None) -> str:
    """The UTF-8 text of a regular file within its kind's limit."""
    data = read_bytes(path, kind, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FuseviewError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _depth_ok(value: object, max_depth: int) -> bool:
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > max_depth:
                return False
            items = v.values() if isinstance(v, dict) else v
            stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))
    return True


def parse_json(
    text: str | bytes, where: str, what: str = "JSON file", max_depth: int = MAX_JSON_DEPTH
) -> object:
    """Parse JSON strictly: no NaN/Infinity, nesting at most max_depth; FuseviewError otherwise."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise FuseviewError(f"{where}: not a {what} (nested deeper than {max_depth} levels)") from None
    except UnicodeDecodeError as exc:
        raise FuseviewError(f"{where}: not a {what} (not UTF-8 text at byte {exc.start})") from None
    except ValueError as exc:
        raise FuseviewError(f"{where}: not a {what} ({shorten(str(exc), 100)})") from None
    if not _depth_ok(value, max_depth):
        raise FuseviewError(f"{where}: not a {what} (nested deeper than {max_depth} levels)")
    return value


def load_json(path: str | os.PathLike, kind: str = "json", what: str | None = None) -> object:
    """Read and strictly parse a JSON file within its kind's size limit."""
    return parse_json(read_bytes(path, kind, what), str(path), what or "JSON file")


def finite(value: float) -> bool:
    """True for a number that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def check_npz(path: str | os.PathLike) -> None:
    """Refuse an .npz whose arrays would take more than the inputs limit once uncompressed (zip bombs)."""
    check_regular(path, "inputs", "inputs (.npz)")
    cap = limit("inputs")
    try:
        with zipfile.ZipFile(path) as z:
            total = sum(info.file_size for info in z.infolist())
            count = len(z.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise FuseviewError(f"{path}: not a readable .npz file ({shorten(str(exc), 80)})") from None
    if count > 10_000:
        raise FuseviewError(f"{path}: {count} arrays in one .npz; fuseview reads at most 10000")
    if total > cap:
        raise FuseviewError(
            f"{path}: arrays would take {_human(total)} uncompressed, over the {_human(cap)} limit"
            f" (set {LIMITS['inputs'][1]} to raise it)"
        )
