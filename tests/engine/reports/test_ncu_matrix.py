"""NVIDIA's pages on every report: ``kernelscope ncu R --page details|raw --csv --print-units base``
prints, byte for byte, what ``ncu --import R --csv --page details|raw --print-units base`` (2025.3.1)
prints.

Two sets of reports, each with ncu's own pages of it:

- ``tests/data/ncu/matrix``: the flag matrix recorded on an H100 by
  ``benchmarks/device/record_ncu_matrix.sh`` (sets, section subsets, NVTX filters, launch skip/count,
  kernel filters, application/range/app-range replay, ``--profile-from-start off``, two processes, CUDA
  graphs per node and whole, a PyTorch SDPA/GEMM/element-wise program, templates in nested and
  anonymous namespaces, one- and two-kernel reports, results without sections, a report of no result);
  its README lists each command. There, the ``--print-units auto`` and ``--rename-kernels off`` pages
  are checked too.
- ``../shared/fixtures/ncu_public.tar.xz``: 25 reports written by other people with older ncu versions
  on other GPUs (RTX 4090, Tesla T4, RTX 3050 Laptop).

Each page is printed by the command line in a process of its own, as a user runs it.
"""

from __future__ import annotations

import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from engine.reports.ncu.kernel_names import simplify_names
from tests.conftest import FIXTURES, REPO

pytest.importorskip("ncu_report")

MATRIX = REPO / "tests" / "data" / "ncu" / "matrix"
PUBLIC = FIXTURES / "ncu_public.tar.xz"
MATRIX_NAMES = sorted(p.name[: -len(".ncu-rep.xz")] for p in MATRIX.glob("*.ncu-rep.xz"))

#: (oracle suffix, extra ``kernelscope ncu`` arguments): every oracle a matrix report has.
_ORACLES = {
    "details": ["--page", "details", "--csv", "--print-units", "base"],
    "raw": ["--page", "raw", "--csv", "--print-units", "base"],
    "details_auto": ["--page", "details", "--csv", "--print-units", "auto"],
    "raw_rename_off": ["--page", "raw", "--csv", "--print-units", "base", "--rename-kernels", "off"],
}


def _public_names() -> list[str]:
    if not PUBLIC.is_file():
        return []
    with tarfile.open(PUBLIC) as tar:
        return sorted(Path(n).name[: -len(".ncu-rep")] for n in tar.getnames() if n.endswith(".ncu-rep"))


def _kernelscope(report: Path, args: list[str]) -> bytes:
    """What ``kernelscope ncu REPORT ARGS`` writes on stdout (exit code 0 required)."""
    done = subprocess.run([sys.executable, "-m", "engine.cli", "ncu", str(report), *args],
                          capture_output=True, cwd=REPO, timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout


def _first_difference(got: bytes, exp: bytes) -> str:
    a, b = got.decode(errors="replace").splitlines(), exp.decode(errors="replace").splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"line {i + 1}:\n ours {x[:400]!r}\n ncu  {y[:400]!r}"
    return f"ours {len(a)} lines ({len(got)} bytes), ncu {len(b)} lines ({len(exp)} bytes)"


def _unxz(src: Path, dst: Path) -> Path:
    with lzma.open(src, "rb") as f, dst.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    return dst


def test_the_matrix_is_there() -> None:
    assert len(MATRIX_NAMES) == 26
    for name in MATRIX_NAMES:
        assert (MATRIX / f"{name}.details.csv.xz").is_file() and (MATRIX / f"{name}.raw.csv.xz").is_file()
    assert "| cpp_graph_whole |" in (MATRIX / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", MATRIX_NAMES)
def test_matrix_pages_are_byte_identical(tmp_path: Path, name: str) -> None:
    report = _unxz(MATRIX / f"{name}.ncu-rep.xz", tmp_path / f"{name}.ncu-rep")
    checked = 0
    for suffix, args in _ORACLES.items():
        oracle = MATRIX / f"{name}.{suffix}.csv.xz"
        if not oracle.is_file():
            continue
        with lzma.open(oracle, "rb") as f:
            exp = f.read()
        got = _kernelscope(report, args)
        assert got == exp, f"{name} {suffix}: {_first_difference(got, exp)}"
        checked += 1
    assert checked >= 2


@pytest.fixture(scope="module")
def public_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not PUBLIC.is_file():
        pytest.skip(f"{PUBLIC} is missing")
    out = tmp_path_factory.mktemp("ncu_public")
    with tarfile.open(PUBLIC) as tar:
        tar.extractall(out, filter="data")
    return out / "ncu_public"


@pytest.mark.parametrize("name", _public_names())
def test_public_pages_are_byte_identical(public_dir: Path, name: str) -> None:
    report = public_dir / f"{name}.ncu-rep"
    for page in ("details", "raw"):
        exp = (public_dir / "oracles" / f"{name}.{page}.csv").read_bytes()
        got = _kernelscope(report, _ORACLES[page])
        assert got == exp, f"{name} {page}: {_first_difference(got, exp)}"


# --- the renaming rules the matrix showed (no report needed) -------------------------------------


@pytest.mark.parametrize(("stored", "printed"), [
    # cpp_skip: every name is in ks:: and ks::detail::, so both go, one-scope chains (ks::Shape) too;
    # the whole chain before <unnamed> takes that name's "<" with it
    (["void ks::detail::binary_kernel<double, ks::ops::Mul<double>>(const T1 *, ks::Shape, T2)",
      "void ks::detail::<unnamed>::scale_kernel<float, (int)4, (bool)1>(const T1 *, int)",
      "void ks::detail::mode_kernel<(ks::Mode)1, (int)-1>(float *, int)"],
     ["void binary_kernel<double, ops::Mul<double>>(const T1 *, Shape, T2)",
      "void unnamed>::scale_kernel<float, 4, 1>(const T1 *, int)",
      "void mode_kernel<1, (int)-1>(float *, int)"]),
    # cpp_from_start_off: ks is in every name (dropped), detail in two of three (kept)
    (["void ks::apply_kernel<k(B &)::[lambda(int) (instance 1)]>(int, T1)",
      "void ks::detail::<unnamed>::scale_kernel<float, (int)4>(const T1 *)",
      "void ks::detail::binary_kernel<float, ks::ops::Add<float>>(ks::Shape, T2)"],
     ["void apply_kernel<k(B &)::[lambda(int) (instance 1)]>(int, T1)",
      "void detail::<unnamed>::scale_kernel<float, 4>(const T1 *)",
      "void detail::binary_kernel<float, ops::Add<float>>(Shape, T2)"]),
    # one kernel name (cpp_one_reduce, cpp_one_scale; launched twice it is still one name)
    (["void outer::mid::inner::deep_reduce<float, (unsigned int)3>(const T1 *, T1 *, int)"] * 2,
     ["void deep_reduce<float, 3>(const T1 *, T1 *, int)"] * 2),
    (["void ks::detail::<unnamed>::scale_kernel<float, (int)4, (bool)1>(const T1 *, T1 *, T1, int)"],
     ["void unnamed>::scale_kernel<float, 4, 1>(const T1 *, T1 *, T1, int)"]),
    # a scope some names lack stays (cpp_fork_all): the tie keeps the outer scope
    (["<unnamed>::anon_fill(float *, int, float)",
      "void ks::detail::binary_kernel<float, ks::ops::Add<float>>(ks::Shape, T2)",
      "void outer::mid::inner::deep_reduce<float, (unsigned int)3>(const T1 *)"],
     ["<unnamed>::anon_fill(float *, int, float)",
      "void ks::binary_kernel<float, ks::Add<float>>(ks::Shape, T2)",
      "void outer::deep_reduce<float, 3>(const T1 *)"]),
])
def test_scopes_in_every_name_are_dropped(stored: list[str], printed: list[str]) -> None:
    assert simplify_names(stored) == printed
