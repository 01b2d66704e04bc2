"""Run ``summary`` and ``findings`` (JSON and text) over every recording and print what breaks the
invariants of tests/invariants.py (issue 25): one line per report with its count of violations.

    python benchmarks/check_invariants.py [NAME_FILTER ...]

The recordings are tests/data/recordings/**/*.xz (decompressed into $TMPDIR/ks_invariants once),
../shared/fixtures (nsys exports, the Kineto trace) and the bundled samples. tests/test_invariants.py
asserts the same in CI.
"""

from __future__ import annotations

import contextlib
import io
import json
import lzma
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.cli.app import main as cli  # noqa: E402 - after the path is set
from tests.invariants import check_findings, check_summary, check_text  # noqa: E402


def reports() -> list[Path]:
    """Every report the check walks, decompressed where needed."""
    out_dir = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ks_invariants"
    out_dir.mkdir(exist_ok=True)
    paths = []
    for p in sorted((REPO / "tests/data/recordings").rglob("*.xz")):
        if p.name.endswith((".sqlite.xz", ".json.xz")) and "oracles" not in p.parts:
            out = out_dir / p.name[:-3]
            if not out.exists():
                out.write_bytes(lzma.decompress(p.read_bytes()))
            paths.append(out)
    shared = REPO.parent / "shared" / "fixtures"
    paths += sorted((shared / "nsys").glob("*.sqlite")) + [shared / "torch" / "torch_sdpa_trace.json"]
    samples = sorted((REPO / "resources/samples").glob("*"))
    paths += [p for p in samples if p.suffix in (".sqlite", ".json", ".gz")]
    return paths


def run(args: list[str]) -> tuple[int, str]:
    """A CLI command in this process: exit status and stdout."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        rc = cli(args)
    return rc, buf.getvalue()


def violations(path: Path) -> list[str]:
    """What breaks the invariants in one report's summary and findings."""
    rc, out = run(["summary", "--json", str(path)])
    if rc:
        return [f"summary exited {rc}"]
    s = json.loads(out)
    found = ["summary: " + x for x in check_summary(s)]
    found += ["summary text: " + x for x in check_text(run(["summary", str(path)])[1])]
    rc, out = run(["findings", "--json", str(path)])
    if rc == 0:
        found += ["findings: " + x for x in check_findings(json.loads(out), s["wall"]["span_ns"])]
    found += ["findings text: " + x for x in check_text(run(["findings", str(path)])[1])]
    return found


def main() -> int:
    """Print each report's violations and the total; exit 1 when there are any."""
    total = 0
    for p in reports():
        if sys.argv[1:] and not any(f in p.name for f in sys.argv[1:]):
            continue
        v = violations(p)
        total += len(v)
        print(f"{p.name}: {len(v)}")
        for x in v[:12]:
            print("   ", x[:230])
    print("TOTAL", total)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
