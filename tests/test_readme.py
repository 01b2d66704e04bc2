"""The README exists once, .ci/run runs exactly its test command, and every doc the code cites exists."""

from __future__ import annotations

import re
from collections import Counter

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
