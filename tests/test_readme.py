"""The README exists once, .ci/run runs exactly its test command, and every doc the code cites exists."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import pytest

from tests.conftest import REPO


def _readme() -> str:
    return (REPO / "README.md").read_text()


def test_ci_runs_exactly_the_readme_test_command() -> None:
    blocks = re.findall(r"```\n(.*?)\n```", _readme(), flags=re.S)
    tests = [b for b in blocks if "pytest" in b and "pip install" in b]
    assert len(tests) == 1, "one test command in the README"
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines()
          if ln and not ln.startswith(("#", "set ", "cd "))]
    assert ci == [tests[0].strip()]


def test_readme_sections_appear_once() -> None:
    heads = [ln for ln in _readme().splitlines() if ln.startswith("## ") or ln.startswith("### ")]
    twice = [h for h, n in Counter(heads).items() if n > 1]
    assert twice == [], f"repeated README sections: {twice}"
    # the two commands a new user needs are at the top, before the first description of a view
    text = _readme()
    assert text.index("kernelscope-gui") < text.index("## The app")
    assert text.index("python -m pytest") < text.index("## The app")


def test_docs_cited_in_the_code_exist() -> None:
    cited = set()
    for folder in ("engine", "gui", "kernels"):
        for path in (REPO / folder).rglob("*.py"):
            cited |= set(re.findall(r"\bdocs/[A-Z_]+\.md\b", path.read_text(encoding="utf-8")))
    assert "docs/FORMATS.md" in cited
    missing = sorted(c for c in cited if not (REPO / c).is_file())
    assert missing == [], f"cited but not in the repository: {missing}"


def test_tracked_tree_fits_the_device_tools_working_tree_limit() -> None:
    """The lent GPU gets a copy of the working tree, 64 MiB at most; keep 8 MiB for runs' own files."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    names = [n for n in out.stdout.decode().split("\0") if n]
    size = sum((REPO / n).stat().st_size for n in names if (REPO / n).is_file())
    assert len(names) > 100
    assert size < 56 * 2**20, f"tracked files are {size / 2**20:.1f} MiB; move data to ../shared or shrink it"
