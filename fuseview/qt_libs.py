"""Before the window starts: are the system libraries of Qt's xcb platform plugin there? (no Qt import)

Without them Qt prints a dozen lines about plugins and aborts (exit 134). This finds the plugin Qt would
load, asks the dynamic loader (ldd) which of its libraries are missing, and names the Debian/Ubuntu
packages that provide them, so the user gets one line with the command to run.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from fuseview.errors import FuseviewError

# soname -> the Debian/Ubuntu package that ships it (Qt 6's xcb plugin and the libraries Qt's GUI needs)
PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0", "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0", "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0", "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xkb.so.1": "libxcb-xkb1", "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb.so.1": "libxcb1", "libX11-xcb.so.1": "libx11-xcb1", "libX11.so.6": "libx11-6",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0", "libxkbcommon.so.0": "libxkbcommon0",
    "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0", "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3", "libglib-2.0.so.0": "libglib2.0-0", "libSM.so.6": "libsm6",
    "libICE.so.6": "libice6", "libXrender.so.1": "libxrender1", "libXext.so.6": "libxext6",
}


# loaded by the plugin at run time (dlopen), so ldd does not list it: Qt 6.5+ refuses to start without it
DLOPENED = ("libxcb-cursor.so.0",)


def uses_xcb(env: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether Qt would start its xcb (X11) platform: asked for, or a DISPLAY and no Wayland display."""
    if not sys.platform.startswith("linux"):
        return False
    platform = env.get("QT_QPA_PLATFORM", "").strip()
    if platform:
        return platform.split(":", 1)[0].split(";", 1)[0] == "xcb"
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def xcb_plugin(env: dict[str, str] | os._Environ = os.environ) -> Path | None:
    """The libqxcb.so Qt would load (QT_QPA_PLATFORM_PLUGIN_PATH first, then PySide6's own), or None."""
    folder = env.get("QT_QPA_PLATFORM_PLUGIN_PATH")
    if folder:
        p = Path(folder) / "libqxcb.so"
        return p if p.is_file() else None
    spec = importlib.util.find_spec("PySide6")
    for root in (spec.submodule_search_locations or []) if spec else []:
        p = Path(root) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if p.is_file():
            return p
    return None


def missing_libraries(library: Path) -> list[str]:
    """Sonames the dynamic loader cannot find for library (and what it loads), in ldd's order."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []  # nothing to ask: Qt will say it itself
    try:
        run = subprocess.run([ldd, str(library)], capture_output=True, text=True, timeout=20, check=False)
        out = run.stdout
    except (OSError, subprocess.SubprocessError):
        return []
    missing: list[str] = []
    for line in out.splitlines():
        name, _, where = line.strip().partition("=>")
        if where.strip() == "not found" and name.strip() not in missing:
            missing.append(name.strip())
    for name in DLOPENED:
        try:
            ctypes.CDLL(name)
        except OSError:
            missing.append(name)
    return missing


def check_qt_platform(env: dict[str, str] | os._Environ = os.environ) -> None:
    """FuseviewError (one line: the missing libraries and the apt command) when xcb cannot start."""
    if not uses_xcb(env):
        return
    plugin = xcb_plugin(env)
    if plugin is None:
        return
    missing = missing_libraries(plugin)
    if not missing:
        return
    packages = sorted({PACKAGES.get(m, m) for m in missing})
    raise FuseviewError(
        f"the window needs system libraries that are missing ({', '.join(missing)}): install them with"
        f" `sudo apt-get install -y {' '.join(packages)}`, or run headless (QT_QPA_PLATFORM=offscreen)"
    )
