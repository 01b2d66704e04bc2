"""The 18-kernel PyTorch recordings (tests/data/ncu): every page byte-identical to ncu 2025.3.1.

``torch18_full`` was profiled with ``--set full --import-source yes``, ``torch18_sol`` with only
``--section SpeedOfLight``; the oracles are ``ncu --import R --csv --page details|raw`` of those
exact files (``--print-units base``, and once without it). Kernel names are ncu's simplified
demangled names (:mod:`engine.reports.ncu.kernel_names`).
"""

from __future__ import annotations

import argparse
import csv
import lzma
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.analysis.ncu.pages import auto_unit, details_csv, raw_csv
from engine.reports.ncu import NcuReport
from engine.reports.ncu.decoders import read_ncu_rep
from engine.reports.ncu.kernel_names import simplify_demangled, strip_literal_casts
from engine.system.errors import KernelscopeError

DATA = Path(__file__).resolve().parents[2] / "data" / "ncu"

pytest.importorskip("ncu_report")


@pytest.fixture(scope="session")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every ``tests/data/ncu/*.xz`` decompressed once per session (the reports are 58-81 MB)."""
    out = tmp_path_factory.mktemp("ncu18")
    for src in sorted(DATA.glob("*.xz")):
        with lzma.open(src, "rb") as f, (out / src.name[: -len(".xz")]).open("wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
    return out


@pytest.fixture(scope="module")
def reports(unpacked: Path) -> dict[str, NcuReport]:
    names = ("torch18_full", "torch18_sol")
    return {n: read_ncu_rep(unpacked / f"{n}.ncu-rep", use_cache=False) for n in names}


def _first_difference(got: str, exp: str) -> str:
    g, e = list(csv.reader(got.splitlines())), list(csv.reader(exp.splitlines()))
    for i, (a, b) in enumerate(zip(g, e, strict=False)):
        if a != b:
            cols = [j for j in range(max(len(a), len(b))) if a[j:j + 1] != b[j:j + 1]]
            return f"row {i} differs in columns {cols}: ours {a[:16]!r} ncu {b[:16]!r}"
    return f"{len(g)} rows, ncu has {len(e)}"


PAGES = [
    ("torch18_full", "details", "base", "torch18_full.details.csv"),
    ("torch18_full", "details", "auto", "torch18_full.details_autounits.csv"),
    ("torch18_full", "raw", "base", "torch18_full.raw.csv"),
    ("torch18_sol", "details", "base", "torch18_sol.details.csv"),
    ("torch18_sol", "raw", "base", "torch18_sol.raw.csv"),
]


@pytest.mark.parametrize(("name", "page", "units", "oracle"), PAGES, ids=[p[3] for p in PAGES])
def test_page_is_byte_identical(reports: dict[str, NcuReport], unpacked: Path, name: str, page: str,
                                units: str, oracle: str) -> None:
    r = reports[name]
    got = details_csv(r, units) if page == "details" else raw_csv(r)
    exp = (unpacked / oracle).read_text()
    assert got == exp, _first_difference(got, exp)


def test_sol_report_prints_only_its_section(reports: dict[str, NcuReport], unpacked: Path) -> None:
    rows = list(csv.reader((unpacked / "torch18_sol.details.csv").open()))
    assert {r[11] for r in rows[1:]} == {"GPU Speed Of Light Throughput", "SpeedOfLight"}
    got = list(csv.reader(details_csv(reports["torch18_sol"]).splitlines()))
    assert len(got) == len(rows) == 1 + 18 * 11  # per kernel: 10 SOL metrics + the SOLBottleneck rule


def test_empty_rule_results_are_not_printed(reports: dict[str, NcuReport]) -> None:
    import ncu_report

    # Kernel 5 stores UncoalescedSharedAccess twice, the second time with no message: ncu prints one.
    ctx = ncu_report.load_report(str(reports["torch18_full"].path))
    stored = [r for r in ctx.range_by_idx(0).action_by_idx(5).rule_results_as_dicts()
              if r["rule_identifier"] == "UncoalescedSharedAccess"]
    assert [bool(r["rule_message"]["message"]) for r in stored] == [True, False]
    m = reports["torch18_full"].metrics
    printed = m[(m["ID"] == "5") & (m["Rule Name"] == "UncoalescedSharedAccess")]
    assert printed[["Rule Type", "Estimated Speedup Type", "Estimated Speedup"]].values.tolist() == [
        ["OPT", "global", "20.17"]]


# --- kernel names ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def names(reports: dict[str, NcuReport], unpacked: Path) -> list[tuple[str, str, set[str]]]:
    """(stored demangled name, raw-page name, details-page names) for each of the 18 kernels."""
    import ncu_report

    ctx = ncu_report.load_report(str(reports["torch18_sol"].path))
    rng = ctx.range_by_idx(0)
    stored = [str(rng.action_by_idx(i).name(rng.action_by_idx(i).NameBase_DEMANGLED))
              for i in range(rng.num_actions())]
    raw = list(csv.reader((unpacked / "torch18_full.raw.csv").open()))[2:]
    details: dict[str, set[str]] = {}
    for r in list(csv.reader((unpacked / "torch18_full.details.csv").open()))[1:]:
        details.setdefault(r[0], set()).add(r[4])
    assert len(stored) == len(raw) == len(details) == 18
    return [(s, raw[i][4], details[str(i)]) for i, s in enumerate(stored)]


def test_names_as_ncu_prints_them(names: list[tuple[str, str, set[str]]]) -> None:
    for stored, raw_name, details_names in names:
        assert details_names == {raw_name}
        assert simplify_demangled(stored) == raw_name, stored


def test_names_the_rules_change(names: list[tuple[str, str, set[str]]]) -> None:
    changed = [(s, n) for s, n, _ in names if s != n]
    assert len(changed) == 15  # the 3 cuBLAS/cuDNN/nvjet kernels have C names and pass through
    # Casts alone would not do: the namespaces matter for 14 of them (softmax needs casts only).
    assert sum(strip_literal_casts(s) != n for s, n in changed) == 14
    for _stored, name in changed:
        assert "at::native::" not in name and "::cuda::" not in name
        assert not re.search(r"\((?:unsigned )?(?:int|long|bool)\)\d", name)


@pytest.mark.parametrize(("stored", "printed"), [
    ("void at::native::reduce_kernel<(int)512, (int)1>(T3)", "void at::reduce_kernel<512, 1>(T3)"),
    ("void f<(bool)0, (long)-3, (unsigned long)2>()", "void f<0, -3, 2>()"),
    ("at::native::binary_internal::MulFunctor<float>", "binary_internal::MulFunctor<float>"),
    ("void at::native::templates::cuda::normal_kernel<T>", "void templates::normal_kernel<T>"),
    ("void at::native::<unnamed>::k(at::native::<unnamed>::P)", "void at::<unnamed>::k(at::<unnamed>::P)"),
    ("at::native::sum_functor<float>::operator ()(at::TensorIterator &)",
     "at::sum_functor<float>::operator ()(at::TensorIterator &)"),
    ("void flashinfer::norm::RMSNormKernel<8>(T2 *)", "void norm::RMSNormKernel<8>(T2 *)"),
    ("void at_cuda_detail::cub::DeviceScanKernel<int>()", "void at_cuda_detail::DeviceScanKernel<int>()"),
    ("std::array<char *, (unsigned long)3>", "std::array<char *, 3>"),
    ("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT"),
    ("sgemm_tiled(int, const float *)", "sgemm_tiled(int, const float *)"),
])
def test_simplify_rules(stored: str, printed: str) -> None:
    assert simplify_demangled(stored) == printed
    assert simplify_demangled(printed) == printed  # idempotent


# --- --print-units auto and the CLI ----------------------------------------------------------


@pytest.mark.parametrize(("unit", "value", "expected"), [
    ("byte", 30_998_528.0, ("Mbyte", "31.00")),
    ("byte/block", 1024.0, ("Kbyte/block", "1.02")),
    ("byte/s", 1_502_803_324_099.72, ("Tbyte/s", "1.50")),
    ("hz", 1_941_243_489.58, ("Ghz", "1.94")),
    ("ns", 6144.0, ("us", "6.14")),
    ("byte/block", 24.0, None),
    ("ns", 999.0, None),
    ("cycle", 22_629.0, None),
    ("%", 1500.0, None),
])
def test_auto_unit(unit: str, value: float, expected: tuple[str, str] | None) -> None:
    assert auto_unit(unit, value) == expected


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from engine.cli.ncu import register

    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    args: Any = p.parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_pages(unpacked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sol = str(unpacked / "torch18_sol.ncu-rep")
    assert _cli(["ncu", sol, "--page", "details", "--csv"], capsys) == (
        unpacked / "torch18_sol.details.csv").read_text()
    out = _cli(["ncu", sol, "--page", "raw", "--kernel", r"^void at::reduce_kernel<512"], capsys)
    rows = list(csv.reader(out.splitlines()))
    assert [r[0] for r in rows[2:]] == ["12"]  # the MaxOps reduction; ncu's name, not at::native::
    with pytest.raises(KernelscopeError, match="print-units auto is available"):
        _cli(["ncu", sol, "--page", "raw", "--print-units", "auto"], capsys)


def test_cli_print_units_auto(unpacked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli(["ncu", str(unpacked / "torch18_full.ncu-rep"), "--page", "details", "--print-units", "auto"],
               capsys)
    assert out == (unpacked / "torch18_full.details_autounits.csv").read_text()
