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

# soname -> the Debian/Ubuntu package, for every library that Qt's widgets and its xcb, wayland and
# offscreen platform plugins (with the GL and shell integrations they load) NEED outside PySide6's own
# folder (readelf -d, tests/test_qt_libs.py): the apt line is these packages, so Qt can start any of them
WINDOW_LIBRARIES = {
    "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0", "libdbus-1.so.3": "libdbus-1-3",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6", "libX11.so.6": "libx11-6", "libX11-xcb.so.1": "libx11-xcb1",
    "libxkbcommon.so.0": "libxkbcommon0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0", "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0", "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-xkb.so.1": "libxcb-xkb1",
    "libwayland-client.so.0": "libwayland-client0", "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
}
# in every Debian/Ubuntu system (required by dpkg and apt themselves): never in the line
BASE_LIBRARIES = {
    "libc.so.6": "libc6", "libm.so.6": "libc6", "ld-linux-x86-64.so.2": "libc6",
    "ld-linux-aarch64.so.1": "libc6",
    "libdl.so.2": "libc6", "libpthread.so.0": "libc6", "librt.so.1": "libc6", "libstdc++.so.6": "libstdc++6",
    "libgcc_s.so.1": "libgcc-s1", "libz.so.1": "zlib1g", "libzstd.so.1": "libzstd1",
}
# soname -> package for the names ldd may report missing besides (what the libraries above load in turn)
PACKAGES = {
    **WINDOW_LIBRARIES, **BASE_LIBRARIES,
    "libxcb-xinerama.so.0": "libxcb-xinerama0", "libxcb-xinput.so.0": "libxcb-xinput0",
    "libOpenGL.so.0": "libopengl0", "libGLX.so.0": "libglx0", "libSM.so.6": "libsm6",
    "libICE.so.6": "libice6", "libXrender.so.1": "libxrender1", "libXext.so.6": "libxext6",
    "libGLdispatch.so.0": "libglvnd0", "libffi.so.8": "libffi8",
    "libpng16.so.16": "libpng16-16", "libexpat.so.1": "libexpat1", "libXau.so.6": "libxau6",
    "libXdmcp.so.6": "libxdmcp6", "libbrotlidec.so.1": "libbrotli1", "libbrotlicommon.so.1": "libbrotli1",
    "libpcre2-8.so.0": "libpcre2-8-0", "libbsd.so.0": "libbsd0", "libmd.so.0": "libmd0",
    "libsystemd.so.0": "libsystemd0", "libcap.so.2": "libcap2", "libgcrypt.so.20": "libgcrypt20",
    "liblz4.so.1": "liblz4-1", "liblzma.so.5": "liblzma5", "libgpg-error.so.0": "libgpg-error0",
}


def apt_line(missing: list[str] | None = None) -> str:
    """The one command that installs every system library of Qt's window (the README prints the same).

    With `missing` (what ldd found absent): when one of them is a library fuseview knows, the whole line,
    since the plugins load more than the one checked (Wayland's cursor and EGL libraries); those of them it
    knows no package of are added by name; when it knows none of them, just their names."""
    known = [m for m in missing or () if m in PACKAGES]
    unknown = sorted({m for m in missing or () if m not in PACKAGES})
    packages = list(dict.fromkeys(WINDOW_LIBRARIES.values())) if missing is None or known else []
    packages += [PACKAGES[m] for m in known if m not in BASE_LIBRARIES and PACKAGES[m] not in packages]
    return "sudo apt-get install -y " + " ".join(dict.fromkeys(packages + unknown))


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
    return platform_plugin("xcb", env)


def platform_plugin(name: str, env: dict[str, str] | os._Environ = os.environ) -> Path | None:
    """The libq<name>.so Qt would load (QT_QPA_PLATFORM_PLUGIN_PATH first, then PySide6's own), or None."""
    folder = env.get("QT_QPA_PLATFORM_PLUGIN_PATH")
    root = _pyside_folder()
    if folder:
        plugin: Path | None = Path(folder) / f"libq{name}.so"
    else:
        plugin = root / "Qt" / "plugins" / "platforms" / f"libq{name}.so" if root else None
    return plugin if plugin is not None and plugin.is_file() else None


def _pyside_folder() -> Path | None:
    spec = importlib.util.find_spec("PySide6")
    for root in (spec.submodule_search_locations or []) if spec else []:
        return Path(root)
    return None


def qt_widgets_library() -> Path | None:
    """PySide6's libQt6Widgets (it loads Qt's core and GUI libraries and their system libraries), or None."""
    root = _pyside_folder()
    p = root / "Qt" / "lib" / "libQt6Widgets.so.6" if root else None
    return p if p is not None and p.is_file() else None


def missing_libraries(library: Path, dlopened: tuple[str, ...] = DLOPENED) -> list[str]:
    """Sonames the dynamic loader cannot find for library (and what it loads), in ldd's order, then those
    of `dlopened` (loaded at run time) that cannot be loaded."""
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
    for name in dlopened:
        if name in missing:
            continue
        try:
            ctypes.CDLL(name)
        except OSError:
            missing.append(name)
    return missing


class MissingLibraries(FuseviewError):
    """Qt cannot start for want of system libraries; its message (the apt command) is printed whole."""

    whole_line = True  # the CLI never shortens it: a command cut in the middle cannot be pasted


def platform_name(env: dict[str, str] | os._Environ = os.environ) -> str:
    """The platform plugin Qt would start: QT_QPA_PLATFORM's, else wayland or xcb by the display."""
    platform = env.get("QT_QPA_PLATFORM", "").strip()
    if platform:
        return platform.split(":", 1)[0].split(";", 1)[0]
    return "wayland" if env.get("WAYLAND_DISPLAY") else "xcb"


def missing_qt_libraries(env: dict[str, str] | os._Environ = os.environ) -> list[str]:
    """Sonames that Qt's widgets library or the platform plugin Qt would start needs and cannot find."""
    if not sys.platform.startswith("linux"):
        return []
    missing: list[str] = []
    name = platform_name(env)
    for library, dlopened in ((qt_widgets_library(), ()), (platform_plugin(name, env),
                                                           DLOPENED if name == "xcb" else ())):
        if library is not None:
            missing += [m for m in missing_libraries(library, dlopened) if m not in missing]
    return missing


def check_qt_libraries(purpose: str, env: dict[str, str] | os._Environ = os.environ, other: str = "") -> None:
    """MissingLibraries (one whole line: the missing libraries and the apt command that installs every
    one, whatever is missing) when Qt cannot start here; `other` names what works without them."""
    missing = missing_qt_libraries(env)
    if not missing:
        return
    names = ", ".join(missing)
    if len(names) > 200:  # the packages are what the line is for: a long list of files says less
        names = f"{len(missing)} of them"
    raise MissingLibraries(
        f"{purpose} needs system libraries that are missing ({names}): install them with"
        f" `{apt_line(missing)}`" + (f", {other}" if other else "")
    )


def check_qt_platform(env: dict[str, str] | os._Environ = os.environ) -> None:
    """MissingLibraries (one line: the missing libraries and the apt command) when the window's Qt cannot
    start; checked only for xcb (X11), the platform whose libraries a desktop may lack."""
    if not uses_xcb(env):
        return
    check_qt_libraries("the window", env, "or run headless (QT_QPA_PLATFORM=offscreen)")


def has_display(env: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether a window can be shown: not Linux, a platform chosen, or a DISPLAY or WAYLAND_DISPLAY set."""
    if not sys.platform.startswith("linux") or env.get("QT_QPA_PLATFORM", "").strip():
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def check_display(env: dict[str, str] | os._Environ = os.environ) -> None:
    """FuseviewError at once when there is no display to show the window on (over SSH, in a container):
    Qt would otherwise start an invisible window that never returns."""
    if not has_display(env):
        raise FuseviewError(
            "no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset): run it on a virtual"
            " one with `xvfb-run fuseview`, or save a picture with `fuseview open M --screenshot s.png`"
        )
