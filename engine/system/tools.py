"""Find NVIDIA's command-line tools (nsys, ncu) and read their versions.

Discovery is a pure function of the environment and the filesystem so tests can point it at
fake installs; running a tool always uses an argv list with a timeout.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_VERSION_RE = re.compile(r"(\d{4})\.(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Tool:
    """An installed tool and its version (None when it could not be read)."""

    path: Path
    version: str | None

    @property
    def version_tuple(self) -> tuple[int, ...]:
        """Version as comparable ints; (0,) when unknown."""
        return parse_version(self.version)


def parse_version(text: str | None) -> tuple[int, ...]:
    """Extract a year-based version such as 2025.3.1 from text; (0,) if none."""
    if not text:
        return (0,)
    m = _VERSION_RE.search(text)
    if not m:
        return (0,)
    return tuple(int(g) for g in m.groups() if g is not None)


def nsys_candidates(env: Mapping[str, str] | None = None, root: str = "/") -> list[Path]:
    """Every nsys executable we can find, in priority order, without duplicates.

    Order: ``$NSYS`` (a file or a directory), ``PATH``, ``/opt/nvidia/nsight-systems/*/bin``,
    ``/usr/local/cuda*/bin``, and the copy that ships inside Nsight Compute
    (``<ncu-root>/host/target-linux-x64/nsys``), whose root is found from ``ncu`` on PATH and
    ``/opt/nvidia/nsight-compute/*``.
    """
    env = os.environ if env is None else env
    # KERNELSCOPE_TOOL_ROOT re-roots the fixed install locations (tests, containers, chroots).
    root = env.get("KERNELSCOPE_TOOL_ROOT", root)
    found: list[Path] = []

    def add(p: str | Path | None) -> None:
        if not p:
            return
        path = Path(p)
        if path.is_dir():
            path = path / "nsys"
        if path.is_file() and os.access(path, os.X_OK):
            real = path.resolve()
            if real not in [f.resolve() for f in found]:
                found.append(path)

    if env.get("NSYS"):
        add(env["NSYS"])
    add(shutil.which("nsys", path=env.get("PATH", "")))
    r = root.rstrip("/")
    for pattern in (
        f"{r}/opt/nvidia/nsight-systems/*/bin/nsys",
        f"{r}/opt/nvidia/nsight-systems-cli/*/bin/nsys",
        f"{r}/usr/local/cuda*/bin/nsys",
        f"{r}/usr/local/cuda*/nsight-systems*/bin/nsys",
    ):
        for p in sorted(glob.glob(pattern), reverse=True):
            add(p)
    ncu_roots: list[Path] = []
    ncu = shutil.which("ncu", path=env.get("PATH", ""))
    if ncu:
        ncu_roots.append(Path(ncu).resolve().parent)
    ncu_roots += [Path(p) for p in sorted(glob.glob(f"{r}/opt/nvidia/nsight-compute/*"), reverse=True)]
    ncu_roots += [Path(p) for p in sorted(glob.glob(f"{r}/usr/local/cuda*/nsight-compute*"), reverse=True)]
    for ncu_root in ncu_roots:
        add(ncu_root / "host" / "target-linux-x64" / "nsys")
    return found


def tool_version(path: Path, timeout_s: float = 30.0) -> str | None:
    """Run ``TOOL --version`` and return the version it prints (None on any failure)."""
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION_RE.search(out.stdout + out.stderr)
    return m.group(0) if m else None


def find_nsys(env: Mapping[str, str] | None = None) -> list[Tool]:
    """All nsys installs with their versions, newest first (ties keep discovery order)."""
    tools = [Tool(p, tool_version(p)) for p in nsys_candidates(env)]
    return sorted(tools, key=lambda t: t.version_tuple, reverse=True)
