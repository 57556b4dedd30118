"""`fuseview` command line: each module in fuseview.commands is one subcommand."""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import pkgutil
import signal
import sys
import threading
from pathlib import Path
from types import ModuleType

import fuseview.commands
from fuseview.atomic import check_output, clean_stale_temps, clear_inputs, register_input
from fuseview.errors import MAX_MESSAGE_CHARS, FuseviewError, user_error_message
from fuseview.options import check_values
from fuseview.textsafe import EscapingStream, forget_model_names, one_line

# A first argument that is not a subcommand is a model or an option of `open` (`fuseview model.onnx`,
# `fuseview --screenshot demo.png`).
_DEFAULT_COMMAND = "open"


def _command_modules() -> dict[str, ModuleType]:
    mods = {}
    for info in pkgutil.iter_modules(fuseview.commands.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"fuseview.commands.{info.name}")
        mods[getattr(mod, "NAME", info.name)] = mod
    return mods


# Arguments that name files fuseview writes; every other existing file named on the line is an input.
OUTPUT_ARGS = frozenset({"output", "save_plan", "screenshot", "json", "export"})


class _OneLineParser(argparse.ArgumentParser):
    """argparse with a one-line error (control characters escaped, long values shortened), exit 2."""

    def error(self, message: str):
        """Print `fuseview: error: ...` on stderr and exit 2."""
        self.exit(2, f"fuseview: error: {one_line(message)}\n")


def _register_inputs(args: argparse.Namespace) -> None:
    for name, value in vars(args).items():
        if name in OUTPUT_ARGS or name.startswith("_"):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v and os.path.lexists(v):
                register_input(v)


# A folder named on the command line (or the current one) may hold temp files of a run killed mid-write
# (SIGKILL): removed at the start of the next command when their process is gone and they are this old
# (a process in another PID namespace sharing the folder is not seen as alive; ten minutes is no write).
STALE_TEMP_AGE_S = 600.0


def _clean_named_folders(args: argparse.Namespace) -> None:
    folders = {"."}
    for name, value in vars(args).items():
        if name.startswith("_"):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v and v != "-" and len(v) < 4096 and "\0" not in v:
                folders.add(v if os.path.isdir(v) else (os.path.dirname(v) or "."))
    for folder in sorted(folders)[:64]:  # bounded: a sweep of many models in one folder is one scan
        clean_stale_temps(folder, STALE_TEMP_AGE_S)


# Output arguments that take `-` for stdout (the report printed instead of written, as `scan --json`).
STDOUT_ARGS = frozenset({"json"})
_FLAGS = {"output": "-o", "save_plan": "--save-plan", "screenshot": "--screenshot", "json": "--json",
          "export": "--export"}


# Arguments that name files (read or written): a name the system cannot look up is one line, not an OSError.
PATH_ARGS = OUTPUT_ARGS | {"model", "against", "inputs", "plan", "before", "after", "profile"}


def _check_path_names(args: argparse.Namespace) -> None:
    for name in sorted(PATH_ARGS):
        value = getattr(args, name, None)
        if not isinstance(value, str) or value in ("", "-"):
            continue
        try:
            os.lstat(value)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno in (errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL):
                raise FuseviewError(f"{value}: {exc.strerror}") from None
        except ValueError:  # an embedded NUL
            raise FuseviewError(f"{value!r}: not a file name (it holds a NUL character)") from None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _check_outputs(args: argparse.Namespace) -> None:
    # fail before any work: an output that is an input, a link, a device, a FIFO, a folder, or empty
    seen: list[tuple[str, str]] = []
    for name in sorted(OUTPUT_ARGS):
        value = getattr(args, name, None)
        if not isinstance(value, str):
            continue
        flag = _FLAGS.get(name, f"--{name}")
        if value == "":
            hint = ", or - for stdout" if name in STDOUT_ARGS else ""
            raise FuseviewError(f"{flag} '': an empty file name (give a path{hint})")
        if value == "-" and name in STDOUT_ARGS:
            continue
        check_output(value)
        for other_flag, other in seen:
            if _same_file(value, other):
                raise FuseviewError(f"{flag} {value}: the same file as {other_flag} {other}; give two paths")
        seen.append((flag, value))


# Commands that run models in onnxruntime in this process.
_ORT_COMMANDS = frozenset({"fuse", "profile", "tune", "sweep"})


def _quiet_onnxruntime(command: str | None) -> None:
    # onnxruntime prints coloured log lines on stderr for errors we report in one line ourselves
    if command in _ORT_COMMANDS or "onnxruntime" in sys.modules:
        import onnxruntime

        onnxruntime.set_default_logger_severity(4)  # fatal only: its errors reach the user as our one line


def build_parser(mods: dict[str, ModuleType] | None = None) -> argparse.ArgumentParser:
    """The argument parser with one subparser per command module."""
    mods = mods if mods is not None else _command_modules()
    parser = _OneLineParser(
        prog="fuseview", allow_abbrev=False,  # exact flag names: --thread is not --threads
        description="See an ONNX graph, choose its kernel fusions, and prove each with timings and error.",
    )
    from fuseview import __version__

    parser.add_argument("--version", action="version", version=f"fuseview {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(mods):
        mod = mods[name]
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP, allow_abbrev=False)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for bad input, with one line on stderr)."""
    out, err = sys.stdout, sys.stderr
    # names from a model reach the terminal: control characters (ESC, NUL, bidi overrides) are escaped
    sys.stdout = EscapingStream(out, keep="\n\t", json_style=True)  # --json output stays valid JSON
    sys.stderr = EscapingStream(err, keep="\n\t\r")
    clear_inputs()  # one call is one run
    forget_model_names()
    argv = list(sys.argv[1:] if argv is None else argv)
    # a file name may hold a newline, bidi marks or bytes that are not UTF-8: printed escaped, whole
    sys.stdout.escape_literally(_spellings(argv))
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = _main(argv)
        sys.stdout.flush()  # a reader that went away is silenced here too, not reported at exit
        return code
    finally:
        sys.stdout, sys.stderr = out, err
        if threading.current_thread() is threading.main_thread() and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _spellings(argv: list[str]) -> list[str]:
    """Each argument as a command may print it: as given, the value of --opt=value, as a Path, absolute."""
    out = []
    for a in argv:
        if not isinstance(a, str):
            continue
        value = a.split("=", 1)[1] if a.startswith("--") and "=" in a else a
        out.append(value)
        with contextlib.suppress(OSError, ValueError):
            out.extend((str(Path(value)), os.path.abspath(value)))
    return sorted(set(out), key=len, reverse=True)  # the longest first: a name inside a path stays whole


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every `with` and `finally` cleans up as for Ctrl-C."""


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the clean-up finish
    raise Terminated()


def _unwind_on_sigterm(command: str | None) -> None:
    """Make SIGTERM unwind like Ctrl-C, so temp folders and files are removed (the window has its own)."""
    if command != "open" and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


def _main(argv: list[str]) -> int:
    mods = _command_modules()
    top_level = ("-h", "--help", "--version")
    if _DEFAULT_COMMAND in mods and (not argv or (argv[0] not in mods and argv[0] not in top_level)):
        argv.insert(0, _DEFAULT_COMMAND)
    parser = build_parser(mods)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        _check_path_names(args)
        _register_inputs(args)
        _check_outputs(args)
        _clean_named_folders(args)
        check_values(vars(args))
        _quiet_onnxruntime(args.command)
        _unwind_on_sigterm(args.command)
        return int(args._run(args) or 0)
    except FuseviewError as exc:
        # a line that carries a command to paste (the apt-get of every missing library) is never cut
        width = MAX_MESSAGE_CHARS if getattr(exc, "whole_line", False) else 400
        print(f"fuseview: error: {one_line(str(exc), width)}", file=sys.stderr)
        return 2
    except Terminated:
        print("fuseview: terminated", file=sys.stderr)
        return 143
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
        message = user_error_message(exc)
        if message is not None:  # the input was refused by onnx, onnxruntime or a decoder
            print(f"fuseview: error: {one_line(message)}", file=sys.stderr)
            return 2
        print(
            one_line(f"fuseview: internal error: {type(exc).__name__}: {exc} (FUSEVIEW_DEBUG=1 shows where)"),
            file=sys.stderr,
        )
        return 1
