"""Check that a change keeps every scan result byte for byte: `fuseview scan --json` of every model.

    python scripts/scan_identity.py --write DIR      # before the change: one JSON file per model in DIR
    python scripts/scan_identity.py --compare DIR    # after it: the same outputs, compared byte for byte

Models: every .onnx under tests/data and assets/models (or the paths given). Each scan is the command
line's own `scan --json --near-misses --provider P` (P: cpu unless --provider says), run through
`fuseview.cli.main` in this process with its stdout captured, so candidates, near misses, notes and dims
are all compared. `--compare` prints each model that differs and exits 1 if any does.

Requires: onnx, onnxruntime, numpy
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

ROOT = Path(__file__).resolve().parent.parent


def models(paths: list[Path]) -> list[Path]:
    """The models to scan: the given paths, or every .onnx under tests/data and assets/models."""
    if paths:
        return paths
    found = [p for d in ("tests/data", "assets/models") for p in (ROOT / d).rglob("*.onnx")]
    return sorted(found)


def scan_json(path: Path, provider: str) -> bytes:
    """`fuseview scan --json --near-misses` of one model as the command line prints it, and its exit code."""
    from fuseview.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["scan", str(path), "--json", "--near-misses", "--provider", provider])
        except SystemExit as e:  # a refused model: its one error line is part of the result
            rc = e.code if isinstance(e.code, int) else 2
    return f"rc {rc}\n{out.getvalue()}{err.getvalue()}".encode()


def key(path: Path) -> str:
    """A file name for one model's output (its path relative to the repository, flattened)."""
    rel = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    return str(rel).replace("/", "__") + ".json"


def main() -> int:
    """Write or compare the scan outputs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, metavar="DIR")
    mode.add_argument("--compare", type=Path, metavar="DIR")
    ap.add_argument("--provider", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("paths", nargs="*", type=Path)
    args = ap.parse_args()
    todo = models(args.paths)
    t0 = time.perf_counter()
    differ, same = [], 0
    for path in todo:
        data = scan_json(path, args.provider)
        if args.write:
            args.write.mkdir(parents=True, exist_ok=True)
            (args.write / key(path)).write_bytes(data)
            continue
        ref = args.compare / key(path)
        if not ref.exists() or ref.read_bytes() != data:
            differ.append(path)
            print(f"DIFFERS  {path}" + ("" if ref.exists() else " (no reference)"))
        else:
            same += 1
    took = time.perf_counter() - t0
    if args.write:
        print(f"wrote {len(todo)} scan outputs to {args.write} in {took:.1f} s")
        return 0
    print(f"{same} of {len(todo)} models byte-identical, {len(differ)} differ ({took:.1f} s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
