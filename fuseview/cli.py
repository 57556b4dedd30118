"""`fuseview` command line: each module in fuseview.commands is one subcommand."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from types import ModuleType

import fuseview.commands
from fuseview.errors import FuseviewError

# A first argument that is not a subcommand is a model to open in the window (`fuseview model.onnx`).
_DEFAULT_COMMAND = "open"


def _command_modules() -> dict[str, ModuleType]:
    mods = {}
    for info in pkgutil.iter_modules(fuseview.commands.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"fuseview.commands.{info.name}")
        mods[getattr(mod, "NAME", info.name)] = mod
    return mods


def build_parser(mods: dict[str, ModuleType] | None = None) -> argparse.ArgumentParser:
    """The argument parser with one subparser per command module."""
    mods = mods if mods is not None else _command_modules()
    parser = argparse.ArgumentParser(
        prog="fuseview",
        description="See an ONNX graph, choose its kernel fusions, and prove each with timings and error.",
    )
    from fuseview import __version__

    parser.add_argument("--version", action="version", version=f"fuseview {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(mods):
        mod = mods[name]
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


class _OneLineParserError(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for bad input, with one line on stderr)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    mods = _command_modules()
    if _DEFAULT_COMMAND in mods and (not argv or (argv[0] not in mods and not argv[0].startswith("-"))):
        argv.insert(0, _DEFAULT_COMMAND)
    parser = build_parser(mods)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except FuseviewError as exc:
        print(f"fuseview: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fuseview: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`fuseview scan M | head`): stop quietly, like any Unix filter
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as exc:  # noqa: BLE001 - a user never sees a traceback
        if os.environ.get("FUSEVIEW_DEBUG"):
            raise
        print(
            f"fuseview: internal error: {type(exc).__name__}: {exc} (FUSEVIEW_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return 1
