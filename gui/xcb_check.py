"""Check the system libraries of Qt's xcb platform plugin before Qt loads it.

When one is missing, Qt aborts the process (status 134) with a hint that is often wrong ("xcb-cursor0
or libxcb-cursor0 is needed" while that one is installed). Here the plugin's real needs are read from
the ELF files themselves (DT_NEEDED of ``libqxcb.so`` and of the Qt libraries PySide6 bundles), each
is loaded with ``dlopen``, and what fails is named with the Debian/Ubuntu package and the exact
``apt-get install`` command. Pure Python (no binutils), no Qt import.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

# Debian 12 / Ubuntu package of every system library the PySide6 xcb plugin and the Qt libraries it
# loads need (derived from `ldd` / `readelf -d` on PySide6/Qt/plugins/platforms/libqxcb.so and
# `dpkg -S`). The README's apt line lists exactly these packages; a test keeps them in step.
SONAME_PACKAGES: dict[str, str] = {
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
}
# Present on every Debian/Ubuntu that runs apt and python3 (libc6, libgcc-s1, libstdc++6, zlib1g,
# libzstd1 are dependencies of apt itself).
BASE_SONAMES = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1", "libgcc_s.so.1", "libstdc++.so.6", "libz.so.1", "libzstd.so.1",
})

_DT_NEEDED = 1
_SHT_DYNAMIC = 6


def elf_needed(path: Path) -> list[str]:
    """The DT_NEEDED entries (sonames) of a 64-bit little-endian ELF shared object."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path} is not a 64-bit little-endian ELF file")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    out: list[str] = []
    for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if sh_type != _SHT_DYNAMIC:
            continue
        strtab_offset = sections[link][4]
        for pos in range(offset, offset + size, entsize or 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == _DT_NEEDED:
                start = strtab_offset + val
                out.append(data[start:data.index(b"\0", start)].decode())
    return out


def qt_dir() -> Path | None:
    """PySide6's bundled Qt folder (``.../PySide6/Qt``), found without importing PySide6."""
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "Qt"


def system_libraries(qt: Path) -> list[str]:
    """Sonames the xcb plugin needs from the system (not bundled with PySide6), in discovery order."""
    bundled = {p.name for p in (qt / "lib").glob("*.so*")}
    todo = [qt / "plugins" / "platforms" / "libqxcb.so", qt / "lib" / "libQt6Widgets.so.6"]
    seen: set[str] = set()
    found: list[str] = []
    while todo:
        lib = todo.pop(0)
        if not lib.is_file():
            continue
        for soname in elf_needed(lib):
            if soname in seen:
                continue
            seen.add(soname)
            if soname in bundled:
                todo.append(qt / "lib" / soname)
            else:
                found.append(soname)
    return found


def _loads(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def install_command(packages: list[str] | None = None) -> str:
    """The apt-get line that installs the given packages (default: all the plugin needs)."""
    names = packages if packages is not None else sorted(set(SONAME_PACKAGES.values()))
    return "sudo apt-get install -y " + " ".join(names)


def uses_xcb(env: dict[str, str] | os._Environ[str]) -> bool:
    """True when Qt will load the xcb plugin (asked for, or Linux's default outside Wayland)."""
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform:
        return platform.split(":")[0].split(";")[0] == "xcb"
    return os.name == "posix" and not env.get("WAYLAND_DISPLAY")


def missing_sentence(qt: Path | None = None) -> str | None:
    """One sentence naming the missing libraries and the install command, or None if all load."""
    qt = qt or qt_dir()
    if qt is None or not (qt / "plugins" / "platforms" / "libqxcb.so").is_file():
        return None
    try:
        needed = system_libraries(qt)
    except (OSError, ValueError, struct.error):
        return None  # an unusual build: let Qt speak for itself
    missing = [s for s in needed if s not in BASE_SONAMES and not _loads(s)]
    if not missing:
        return None
    packages = sorted({SONAME_PACKAGES.get(s, s) for s in missing})
    return (
        f"Qt's X11 (xcb) platform plugin cannot load because {', '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} missing; on Debian/Ubuntu install "
        f"{'it' if len(missing) == 1 else 'them'} with `{install_command(packages)}` (or all the "
        f"plugin needs with `{install_command()}`), or run with QT_QPA_PLATFORM=offscreen."
    )
