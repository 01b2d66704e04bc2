"""Nsight Compute reports: the details and raw pages against `ncu --import --csv --print-units base`."""

from __future__ import annotations

import csv
import hashlib
import math
import shutil
from pathlib import Path

import pytest

from engine.analysis.ncu.pages import details_csv, raw_csv
from engine.reports.ncu import parse_number, read_ncu, to_base_unit
from engine.system.errors import ReportError
from tests.conftest import FIXTURES, ORACLES

NCU = FIXTURES / "ncu"
NAMES = ["host_overhead_fixed", "torch_sdpa"]

pytest.importorskip("ncu_report")


@pytest.fixture(scope="module", params=NAMES)
def report(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return request.param, read_ncu(NCU / f"{request.param}.ncu-rep")


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(text.splitlines()))


def test_details_page_is_byte_identical(report) -> None:  # type: ignore[no-untyped-def]
    name, r = report
    assert details_csv(r) == (ORACLES / f"{name}.details.csv").read_text()


def test_details_every_row(report) -> None:  # type: ignore[no-untyped-def]
    name, r = report
    got = _rows(details_csv(r))
    exp = list(csv.reader((ORACLES / f"{name}.details.csv").open()))
    assert len(got) == len(exp)
    for i, (g, e) in enumerate(zip(got, exp, strict=True)):
        assert g == e, f"row {i}: {e[11:15]}"


def test_raw_page_is_byte_identical(report) -> None:  # type: ignore[no-untyped-def]
    name, r = report
    assert raw_csv(r) == (ORACLES / f"{name}.raw.csv").read_text()


def test_kernels_table(report) -> None:  # type: ignore[no-untyped-def]
    name, r = report
    k = r.kernels
    assert len(k) == (2 if name == "host_overhead_fixed" else 4)
    assert (k["CC"] == "9.0").all() and (k["duration_ns"] > 0).all()
    if name == "host_overhead_fixed":
        assert k.loc[0, "Kernel Name"] == "void sgemm_tiled<16>(int, const float *, const float *, float *)"
        assert k.loc[1, "Mangled Name"] == "_Z5saxpyifPKfPf"
        assert k.loc[0, "duration_ns"] == 2_101_888
        assert (k.loc[0, "grid_x"], k.loc[0, "block_x"], k.loc[0, "Registers Per Thread"]) == (128, 16, 32)
        assert k.loc[0, "Static Shared Memory Per Block"] == 2048
    else:
        assert k.loc[0, "Dynamic Shared Memory Per Block"] == 134_144


def test_input_not_modified() -> None:
    p = NCU / "host_overhead_fixed.ncu-rep"
    before = hashlib.sha256(p.read_bytes()).hexdigest()
    read_ncu(p)
    assert hashlib.sha256(p.read_bytes()).hexdigest() == before


# --- CSV exports (locale-formatted, auto-scaled units) -----------------------------------------

def _close(a: float, b: float) -> bool:
    # The exports print 2 (details) or 6 (raw) decimals of the scaled value: allow half a last digit.
    return math.isclose(a, b, rel_tol=5e-3, abs_tol=5e-3)


def test_csv_details_import_matches_report() -> None:
    rep = read_ncu(NCU / "host_overhead_fixed.ncu-rep").metrics
    imp = read_ncu(NCU / "host_overhead_fixed_details.csv").metrics
    assert len(rep) == len(imp)
    assert list(imp["Metric Unit"]) == list(rep["Metric Unit"])  # converted to base units
    assert list(imp["Rule Description"]) == list(rep["Rule Description"])
    n = 0
    for a, b in zip(rep["value"], imp["value"], strict=True):
        if not math.isnan(a):
            assert _close(a, b), (a, b)
            n += 1
    assert n > 150


def test_csv_raw_import_matches_report() -> None:
    rep = read_ncu(NCU / "host_overhead_fixed.ncu-rep")
    imp = read_ncu(NCU / "host_overhead_fixed_raw.csv")
    assert list(imp.raw.columns) == list(rep.raw.columns)
    assert imp.raw_units == rep.raw_units
    n = 0
    for col in rep.raw.columns[11:]:
        for a, b in zip(rep.raw[col], imp.raw[col], strict=True):
            va, vb = parse_number(a), parse_number(b)
            if math.isnan(va):
                continue
            # the report side is printed with 2 decimals
            assert math.isclose(va, vb, rel_tol=1e-5, abs_tol=0.011), (col, a, b)
            n += 1
    assert n > 4000
    assert list(imp.kernels["duration_ns"]) == list(rep.kernels["duration_ns"])


def test_csv_base_oracle_round_trips() -> None:
    r = read_ncu(ORACLES / "host_overhead_fixed.details.csv")
    assert details_csv(r) == (ORACLES / "host_overhead_fixed.details.csv").read_text()


@pytest.mark.parametrize(("unit", "base", "factor"), [
    ("Ghz", "hz", 1e9), ("ms", "ns", 1e6), ("Kbyte/block", "byte/block", 1e3),
    ("sector/us", "sector/s", 1e6), ("%/Kbyte", "%/byte", 1e3), ("inst", "inst", 1.0),
])
def test_units(unit: str, base: str, factor: float) -> None:
    assert to_base_unit(unit) == (base, factor)


def test_locale_numbers() -> None:
    assert parse_number("1,234.5") == 1234.5
    assert parse_number("1.234,5") == 1234.5
    assert math.isnan(parse_number("n/a"))


# --- bad input ---------------------------------------------------------------------------------

def _one_sentence(exc: ReportError) -> None:
    msg = str(exc)
    assert msg.endswith(".") and "\n" not in msg and msg.count(". ") == 0, msg


def test_bad_inputs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    trunc = tmp_path / "trunc.ncu-rep"
    trunc.write_bytes((NCU / "host_overhead_fixed.ncu-rep").read_bytes()[:3_000_000])
    text = tmp_path / "notes.ncu-rep"
    text.write_text("hello\n")
    nsys = tmp_path / "x.ncu-rep"
    shutil.copy(FIXTURES / "nsys" / "host_overhead_fixed.sqlite", nsys)
    badcsv = tmp_path / "x.csv"
    badcsv.write_text("a,b\n1,2\n")
    for path, words in [
        (empty, "empty"), (trunc, "truncated"), (text, "not an Nsight Compute report"),
        (nsys, "not an Nsight Compute report"), (tmp_path, "folder"),
        (tmp_path / "missing.ncu-rep", "does not exist"), (badcsv, "not an `ncu --csv"),
    ]:
        with pytest.raises(ReportError) as ei:
            read_ncu(path)
        assert words in str(ei.value)
        _one_sentence(ei.value)


# --- the `ncu` subcommand ------------------------------------------------------------------------

def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    import argparse

    from engine.cli.ncu import register

    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    args = p.parse_args(argv)
    rc = args.func(args)
    return rc, capsys.readouterr().out


def test_cli_summary(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(["ncu", str(NCU / "host_overhead_fixed.ncu-rep")], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert "Compute (SM) %" in lines[0] and len(lines) == 4
    assert "2,101.89" in lines[2] and "73.38" in lines[2] and "97.51" in lines[2]


def test_cli_pages_and_filter(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    rc, out = _run(["ncu", str(NCU / "torch_sdpa.ncu-rep"), "--page", "details"], capsys)
    assert out == (ORACLES / "torch_sdpa.details.csv").read_text()
    rc, out = _run(["ncu", str(NCU / "host_overhead_fixed.ncu-rep"), "--page", "raw", "--kernel", "saxpy"],
                   capsys)
    rows = _rows(out)
    assert len(rows) == 3 and rows[2][4].startswith("saxpy")
    rc, out = _run(["ncu", str(NCU / "host_overhead_fixed_details.csv"), "--json"], capsys)
    data = json.loads(out)
    assert [d["Registers Per Thread"] for d in data] == [32, 16]


def test_cli_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.system.errors import KernelscopeError

    with pytest.raises(KernelscopeError, match="No kernel name matches"):
        _run(["ncu", str(NCU / "host_overhead_fixed.ncu-rep"), "--kernel", "nomatch"], capsys)
    with pytest.raises(KernelscopeError, match="no raw page"):
        _run(["ncu", str(NCU / "host_overhead_fixed_details.csv"), "--page", "raw"], capsys)
