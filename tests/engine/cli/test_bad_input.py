"""Bad input never crashes the CLI: every case gives one sentence on stderr and exit status 1.

The matrix: truncated copies (first 1 KB, first half) of the real H200 fixtures, empty files, a
directory, foreign files with the right extension, a FIFO, an unreadable path (/proc/1/mem refuses
even root), a report that disappears between opening and reading, .nsys-rep with no nsys, foreign or
corrupt telemetry, malformed TOML (gates, checklist, session spec), a program that does not exist,
and ncu-compare given an nsys report. Each row names the fragment the sentence must contain.
"""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

from engine.system.errors import KernelscopeError
from tests.conftest import FIXTURES, REPO

KS = [sys.executable, "-m", "engine.cli"]
NSYS_SQLITE = FIXTURES / "nsys" / "host_overhead_fixed.sqlite"
NSYS_REP = FIXTURES / "nsys" / "host_overhead_fixed.nsys-rep"
NCU_REP = FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep"
TORCH = FIXTURES / "torch" / "torch_sdpa_trace.json"
TELEMETRY = FIXTURES / "telemetry" / "telemetry_h200.csv"
UNREADABLE = Path("/proc/1/mem")  # PermissionError even for root (ptrace rules)


def _png() -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0\xff\0\0"))
            + chunk(b"IEND", b""))


def _half(src: Path) -> bytes:
    data = src.read_bytes()
    return data[: len(data) // 2]


def make_bad_files(d: Path) -> dict[str, Path]:
    """Write every bad input into ``d``; returns name -> path (shared with the GUI test)."""
    torch_gz = gzip.compress(TORCH.read_bytes())
    contents: dict[str, bytes] = {
        "trunc1k.sqlite": NSYS_SQLITE.read_bytes()[:1024],
        "half.sqlite": _half(NSYS_SQLITE),
        "trunc1k.nsys-rep": NSYS_REP.read_bytes()[:1024],
        "half.nsys-rep": _half(NSYS_REP),
        "trunc1k.ncu-rep": NCU_REP.read_bytes()[:1024],
        "half.ncu-rep": _half(NCU_REP),
        "trunc1k.json": TORCH.read_bytes()[:1024],
        "half.json": _half(TORCH),
        "half.json.gz": torch_gz[: len(torch_gz) // 2],
        "empty.sqlite": b"",
        "empty.ncu-rep": b"",
        "png.ncu-rep": _png(),
        "notatrace.json": b'{"hello": [1, 2, 3]}',
        "foreign.csv": b"a,b,c\n1,2,3\n",
        "png.toml": _png(),
        "bad_gates.toml": b'[[gate]\nmetric = "x"\n',
        "bad_checklist.toml": b'title = "x\n[[item',
        "bad_spec.toml": b'tool = "nsys"\nargv = [\n',
    }
    out = {}
    for name, data in contents.items():
        (d / name).write_bytes(data)
        out[name] = d / name
    buf = d / "zip.nsys-rep"
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.txt", "hello")
    out["zip.nsys-rep"] = buf
    (d / "adir.nsys-rep").mkdir()
    out["adir.nsys-rep"] = d / "adir.nsys-rep"
    os.mkfifo(d / "fifo.sqlite")
    out["fifo.sqlite"] = d / "fifo.sqlite"
    out["unreadable"] = UNREADABLE
    return out


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_bad_files(tmp_path_factory.mktemp("bad"))


TRUNC_SQLITE = "is not a readable SQLite database (database disk image is malformed); it may be truncated"
TRUNC_REP = "has no Nsight Systems version record, so it is probably truncated or damaged"
TRUNC_NCU = "is truncated or damaged ("
NOT_TIMELINE = "is an Nsight Compute report; open it with `kernelscope ncu`"
BAD_JSON = "is not valid JSON ("
BAD_GZ = "could not be read or decompressed (Compressed file ended"
EMPTY = "is empty (0 bytes)"
DIR = "is a directory; give the path of a report file inside it."
FIFO = "is not a regular file (a pipe, socket or device)"
DENIED = "cannot be read: permission denied; check its permissions."
FOREIGN = "is not a report Kernelscope can read"
NOT_TRACE = "is JSON but not a Chrome/PyTorch profiler trace"
NOT_NCU = "is not an Nsight Compute report (.ncu-rep); open a file written by `ncu -o`."

# For the report readers (stats, analyze, summary, info, findings, export): file -> sentence.
TIMELINE_CASES = {
    "trunc1k.sqlite": TRUNC_SQLITE, "half.sqlite": TRUNC_SQLITE,
    "trunc1k.nsys-rep": TRUNC_REP, "half.nsys-rep": TRUNC_REP,
    "trunc1k.ncu-rep": NOT_TIMELINE, "half.ncu-rep": NOT_TIMELINE,
    "trunc1k.json": BAD_JSON, "half.json": BAD_JSON, "half.json.gz": BAD_GZ,
    "empty.sqlite": EMPTY, "empty.ncu-rep": EMPTY, "adir.nsys-rep": DIR, "fifo.sqlite": FIFO,
    "unreadable": DENIED, "png.ncu-rep": NOT_TIMELINE, "zip.nsys-rep": FOREIGN,
    "notatrace.json": NOT_TRACE,
}
# findings and checklist --report also read Nsight Compute reports.
NCU_AWARE = {**TIMELINE_CASES, "trunc1k.ncu-rep": TRUNC_NCU, "half.ncu-rep": TRUNC_NCU,
             "png.ncu-rep": NOT_NCU}
NCU_CASES = {
    "trunc1k.ncu-rep": TRUNC_NCU, "half.ncu-rep": TRUNC_NCU, "empty.ncu-rep": EMPTY,
    "png.ncu-rep": NOT_NCU, "zip.nsys-rep": NOT_NCU, "half.sqlite": NOT_NCU, "notatrace.json": NOT_NCU,
    "adir.nsys-rep": "is a folder, not a report", "fifo.sqlite": FIFO, "unreadable": DENIED,
}
TELEMETRY_CASES = {
    "foreign.csv": "is not a Kernelscope telemetry recording (its columns are a, b, c;",
    "half.json.gz": "is not a readable CSV file (EOFError)",
    "png.ncu-rep": "is not a readable CSV file (UnicodeDecodeError)",
    "empty.sqlite": "is empty; record one with", "adir.nsys-rep": "does not exist or is not a file;",
    "notatrace.json": "is not a telemetry recording (it is a JSON file)",
    "half.sqlite": "is not a telemetry recording (it is an SQLite database, e.g. an nsys export)",
    "unreadable": DENIED,
}

COMMANDS = {
    "stats": (lambda f: ["stats", f], TIMELINE_CASES),
    "analyze": (lambda f: ["analyze", f], TIMELINE_CASES),
    "summary": (lambda f: ["summary", f], TIMELINE_CASES),
    "info": (lambda f: ["info", f], TIMELINE_CASES),
    "compare": (lambda f: ["compare", str(NSYS_SQLITE), f], TIMELINE_CASES),
    "export": (lambda f: ["export", "--format", "md", "-o", "/dev/null", f], NCU_AWARE),
    "findings": (lambda f: ["findings", f], NCU_AWARE),
    "checklist": (lambda f: ["checklist", "roadmap", "--report", f], NCU_AWARE),
    "ncu": (lambda f: ["ncu", f], NCU_CASES),
    "ncu-compare": (lambda f: ["ncu-compare", str(NCU_REP), f], NCU_CASES),
    "telemetry": (lambda f: ["telemetry", "--replay", f, "--speed", "0"], TELEMETRY_CASES),
}
# Rows whose answer could depend on an installed nsys run twice: with none visible and with the fake
# nsys of tests/engine/fake_tools visible (so the suite does not depend on what this machine has).
NSYS_VISIBILITY = ("no-nsys", "fake-nsys")
MATRIX = [
    (cmd, name, frag, nsys)
    for cmd, (_, cases) in COMMANDS.items()
    for name, frag in cases.items()
    for nsys in (NSYS_VISIBILITY if name.endswith(".nsys-rep") else NSYS_VISIBILITY[:1])
]


def nsys_env(visibility: str, tmp: Path) -> dict[str, str]:
    """The environment with no nsys anywhere, or with only the fake nsys (on PATH, not via $NSYS)."""
    env = os.environ.copy()
    env.pop("NSYS", None)
    env["KERNELSCOPE_TOOL_ROOT"] = "/nonexistent"  # hides /opt/nvidia/..., /usr/local/cuda*/bin
    env["PATH"] = str(Path(sys.executable).parent)
    if visibility == "fake-nsys":
        from tests.engine import fake_tools

        fake = fake_tools.install(tmp / "root")
        env = fake_tools.env_for(fake)
        env.pop("NSYS", None)
        env["KERNELSCOPE_TOOL_ROOT"] = "/nonexistent"
        env["PATH"] = f"{fake.nsys.parent}{os.pathsep}{Path(sys.executable).parent}"
    return env


def run_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(KS + args, capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=env or nsys_env("no-nsys", Path("/nonexistent")))


def assert_one_sentence(r: subprocess.CompletedProcess[str], fragment: str) -> str:
    """Exit 1, no traceback, and the last stderr line is the one sentence naming the problem.

    Earlier lines may only be the kernelscope: progress lines of a long step (nsys export).
    """
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines and all(ln.startswith("kernelscope: ") for ln in lines), r.stderr
    last = lines[-1]
    assert fragment in last, last
    assert last.endswith("."), last
    return last


@pytest.mark.parametrize(("cmd", "name", "fragment", "nsys"), MATRIX,
                         ids=[f"{c}-{n}" + ("-fake-nsys" if v != "no-nsys" else "") for c, n, _, v in MATRIX])
def test_cli_bad_file(bad: dict[str, Path], tmp_path: Path, cmd: str, name: str, fragment: str,
                      nsys: str) -> None:
    build, _ = COMMANDS[cmd]
    r = run_cli(build(str(bad[name])), env=nsys_env(nsys, tmp_path))
    assert_one_sentence(r, fragment)
    # The sentence comes first: no progress line (hashing, exporting) in front of it.
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("cmd", ["stats", "findings", "info"])
def test_nsys_rep_without_nsys(cmd: str) -> None:
    last = assert_one_sentence(
        run_cli([cmd, str(NSYS_REP)], env=nsys_env("no-nsys", Path("/nonexistent"))),
        "was written by Nsight Systems 2025.3.1.0 and needs an nsys of that version or newer",
    )
    assert "set NSYS=/path/to/nsys" in last


def test_nsys_rep_with_an_nsys_on_path(tmp_path: Path) -> None:
    """The counterpart: the same complete report opens when an nsys is on PATH (the fake exports the
    fixture's own SQLite), and its stats equal those of the .sqlite export."""
    env = nsys_env("fake-nsys", tmp_path)
    via_rep = run_cli(["stats", "-f", "csv", str(NSYS_REP)], env=env)
    assert via_rep.returncode == 0, via_rep.stderr
    direct = run_cli(["stats", "-f", "csv", str(NSYS_SQLITE)])
    assert direct.returncode == 0 and via_rep.stdout == direct.stdout and "[CUDA memset]" in direct.stdout
    # Progress lines appear only on a terminal or with --progress (stderr is a pipe here).
    assert "kernelscope:" not in via_rep.stderr, via_rep.stderr
    fresh_cache = dict(env, KERNELSCOPE_CACHE=str(tmp_path / "fresh-cache"))
    shown = run_cli(["--progress", "stats", "-f", "csv", str(NSYS_REP)], env=fresh_cache)
    assert shown.returncode == 0 and "kernelscope: hashing report" in shown.stderr, shown.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["gate", "--rules", "{bad_gates.toml}", str(NCU_REP)], "is not valid TOML (Expected ']]'"),
        (["gate", "--rules", "{png.toml}", str(NCU_REP)], "is not a text file (not UTF-8)"),
        (["checklist", "{bad_checklist.toml}"], "is not valid TOML (Illegal character"),
        (["checklist", "{png.toml}"], "is not a text file (not UTF-8)"),
        (["run", "--spec", "{bad_spec.toml}"], "is not valid TOML (Invalid value"),
        (["run", "--spec", "{png.toml}"], "is not a text file (not UTF-8)"),
        (["ncu-compare", str(NSYS_SQLITE), str(NCU_REP)], f"{NSYS_SQLITE} {NOT_NCU}"),
        (["ncu-compare", str(NCU_REP), str(NSYS_REP)], f"{NSYS_REP} {NOT_NCU}"),
        (["findings", "--telemetry", "{foreign.csv}", str(NSYS_SQLITE)],
         "is not a Kernelscope telemetry recording"),
        (["compare", "--telemetry-a", "{png.ncu-rep}", "--telemetry-b", str(TELEMETRY),
          str(NSYS_SQLITE), str(NSYS_SQLITE)], "is not a readable CSV file (UnicodeDecodeError)"),
    ],
    ids=["gate-bad-toml", "gate-binary", "checklist-bad-toml", "checklist-binary", "spec-bad-toml",
         "spec-binary", "ncu-compare-nsys-before", "ncu-compare-nsys-after", "findings-telemetry",
         "compare-telemetry"],
)
def test_cli_bad_config(bad: dict[str, Path], args: list[str], fragment: str) -> None:
    argv = [str(bad[a[1:-1]]) if a.startswith("{") else a for a in args]
    assert_one_sentence(run_cli(argv), fragment)


def test_run_missing_program(tmp_path: Path) -> None:
    r = run_cli(["run", "--out", str(tmp_path), "--", "/nonexistent/prog"])
    last = assert_one_sentence(r, "Could not start /nonexistent/prog (No such file or directory)")
    assert "check that it exists and is executable." in last
    # The session is still recorded, with its log, so nothing is lost.
    assert len(list(tmp_path.glob("*/session.log"))) == 1


def test_file_disappears_between_open_and_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sniff_kind saw the file; it is deleted before the reader opens it."""
    from engine.reports.kineto import KinetoTrace
    from engine.reports.ncu import open_ncu
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace
    from engine.reports.open import sniff_kind

    for src, reader in ((NSYS_SQLITE, NsysSqliteTrace), (TORCH, KinetoTrace)):
        copy = tmp_path / src.name
        shutil.copy(src, copy)
        assert sniff_kind(copy) in ("sqlite", "json")
        copy.unlink()
        with pytest.raises(KernelscopeError, match="no longer exists .* open it again"):
            reader(copy)
    # Our own Nsight Compute reader decodes every metric at once: the file is not needed again.
    copy = tmp_path / NCU_REP.name
    shutil.copy(NCU_REP, copy)
    trace = open_ncu(copy)
    copy.unlink()
    assert len(trace.ncu.raw) == len(trace.ncu.kernels) > 0
    # The ncu_report reader reads the remaining metrics lazily: the report deleted after its summary.
    monkeypatch.setenv("KERNELSCOPE_NCU_OWN", "0")
    copy = tmp_path / f"again-{NCU_REP.name}"
    shutil.copy(NCU_REP, copy)
    trace = open_ncu(copy)
    assert len(trace.ncu.kernels) > 0
    copy.unlink()
    with pytest.raises(KernelscopeError, match="could not be read again .* open it again"):
        _ = trace.ncu.raw
