"""Shared test fixtures: where ../shared/fixtures lives, and a private cache dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KERNELSCOPE_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures"
NSYS_DIR = FIXTURES / "nsys"
ORACLES = FIXTURES / "oracles"
NSYS_SQLITE = sorted(NSYS_DIR.glob("*.sqlite"))

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the real user cache, config or data (session store, calibrations) from tests."""
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("KERNELSCOPE_CONFIG", str(tmp_path_factory.mktemp("config")))
    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path_factory.mktemp("data")))


def alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def resident_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (/proc/self/smaps; Linux)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:
            inside = len(head) > 5 and head[5] == str(path)
        elif inside and head and head[0] == "Rss:":
            total += int(head[1])
    return total


def pytest_report_header(config: pytest.Config) -> str:
    return f"kernelscope fixtures: {FIXTURES} ({'present' if FIXTURES.is_dir() else 'MISSING'})"
