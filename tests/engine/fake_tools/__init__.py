"""Stand-ins for nsys, ncu and QdstrmImporter (absent on test machines), and a helper to install them.

They imitate the real tools' command lines, messages and exit codes (as seen on the lent H200 with
Nsight 2025.3.1) and write the real recorded reports from ../shared/fixtures, so what the runner keeps
can be read back by the engine and compared with NVIDIA's oracles. Behaviour is chosen with
``FAKE_MODE`` (see each script); every call's argv is appended to ``$FAKE_ARGV_LOG`` as JSON lines.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
NCU_VERSION = "2025.3.1"


@dataclass
class FakeInstall:
    root: Path  # acts as "/" for KERNELSCOPE_TOOL_ROOT
    ncu: Path
    nsys: Path
    importer: Path
    libs: Path  # a folder holding libdw.so.1 (what the importer "needs")
    argv_log: Path


def _install_script(src: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    body = (HERE / src).read_text()
    dest.write_text(f"#!{sys.executable}\n" + body)
    dest.chmod(0o755)


def install(root: Path) -> FakeInstall:
    """Lay out fake tools like Nsight Compute 2025.3.1 on the lent machine, under root."""
    base = root / "opt" / "nvidia" / "nsight-compute" / NCU_VERSION
    ncu = base / "ncu"
    nsys = base / "host" / "target-linux-x64" / "nsys"
    importer = base / "host" / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter"
    _install_script("fake_ncu.py", ncu)
    _install_script("fake_nsys.py", nsys)
    _install_script("fake_importer.py", importer)
    libs = root / "kit-libs"
    libs.mkdir(parents=True, exist_ok=True)
    (libs / "libdw.so.1").write_bytes(b"")
    return FakeInstall(root, ncu, nsys, importer, libs, root / "argv.jsonl")


def env_for(fake: FakeInstall, mode: str = "ok", **extra: str) -> dict[str, str]:
    """An environment in which only the fake tools are found."""
    from tests.conftest import FIXTURES

    env = {k: v for k, v in os.environ.items() if k not in ("NSYS", "NCU", "KERNELSCOPE_IMPORTER_LIBS",
                                                           "KERNELSCOPE_IMPORTER", "LD_LIBRARY_PATH")}
    env.update({
        "KERNELSCOPE_TOOL_ROOT": str(fake.root), "NSYS": str(fake.nsys), "NCU": str(fake.ncu),
        "FAKE_MODE": mode, "FAKE_ARGV_LOG": str(fake.argv_log),
        "FAKE_NSYS_REP": str(FIXTURES / "nsys" / "host_overhead_fixed.nsys-rep"),
        "FAKE_NSYS_SQLITE": str(FIXTURES / "nsys" / "host_overhead_fixed.sqlite"),
        "FAKE_NCU_REP": str(FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep"),
    })
    env.update(extra)
    return env
