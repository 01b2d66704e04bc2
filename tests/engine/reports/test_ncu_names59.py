"""Kernel names as ncu 2025.3.1 prints them, checked on a COMPLETE report (engine.reports.ncu.kernel_names).

``tests/data/ncu/names59_pairs.json`` holds every kernel of one H200 report (59 launches of
benchmarks/ncu_names_workload.py: CUB radix sort / scan / select / reduce, thrust iterators, ATen
topk, sort, histogram, distributions): the name the report stores, the name ncu printed with its
default renaming and the name it printed with ``--rename-kernels off``. With the 18 kernels of
``tests/data/ncu/torch18_full`` that is 77 names from two reports; :func:`simplify_names` must
print all 77 as ncu did.
"""

from __future__ import annotations

import csv
import json
import lzma
import re
import shutil
from pathlib import Path

import pytest

from engine.reports.ncu.kernel_names import scope_counts, simplify_names, strip_literal_casts

DATA = Path(__file__).resolve().parents[2] / "data" / "ncu"
N59 = json.loads((DATA / "names59_pairs.json").read_text(encoding="utf-8"))
KERNELS = N59["kernels"]
STORED = [k["stored"] for k in KERNELS]
PRINTED = [k["renamed"] for k in KERNELS]


def test_names59_is_the_whole_report() -> None:
    assert N59["report_kernels"] == len(KERNELS) == 59
    assert [k["id"] for k in KERNELS] == list(range(59))
    # --rename-kernels off prints the stored name verbatim, casts included.
    assert all(k["rename_off"] == k["stored"] for k in KERNELS)
    # The renaming changes 58 of the 59 (the nvjet kernel has a C name).
    assert [k["id"] for k in KERNELS if k["renamed"] == k["stored"]] == [56]


def test_names59_as_ncu_prints_them() -> None:
    got = simplify_names(STORED)
    assert [k["id"] for k, g in zip(KERNELS, got, strict=True) if g != k["renamed"]] == []


@pytest.fixture(scope="module")
def torch18(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    """torch18_full's stored names (ncu_report) and the names of ncu's raw-page oracle."""
    ncu_report = pytest.importorskip("ncu_report")
    rep = tmp_path_factory.mktemp("t18") / "torch18_full.ncu-rep"
    with lzma.open(DATA / "torch18_full.ncu-rep.xz", "rb") as f, rep.open("wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    rng = ncu_report.load_report(str(rep)).range_by_idx(0)
    actions = [rng.action_by_idx(i) for i in range(rng.num_actions())]
    stored = [str(a.name(a.NameBase_DEMANGLED)) for a in actions]
    with lzma.open(DATA / "torch18_full.raw.csv.xz", "rt", encoding="utf-8", newline="") as f:
        printed = [r[4] for r in list(csv.reader(f))[2:]]
    return stored, printed


def test_all_77_names_of_two_reports(torch18: tuple[list[str], list[str]]) -> None:
    """Each report simplified as a whole: 59 + 18 names, all as ncu printed them."""
    stored18, printed18 = torch18
    assert len(stored18) == len(printed18) == 18
    matched = sum(g == p for g, p in zip(simplify_names(STORED), PRINTED, strict=True))
    matched += sum(g == p for g, p in zip(simplify_names(stored18), printed18, strict=True))
    assert matched == 77


def test_the_same_chain_prints_differently_in_the_two_reports(torch18: tuple[list[str], list[str]]) -> None:
    """``at::native::`` prints as ``native::`` in names59 (``at`` also heads ``at::cuda`` chains) and
    as ``at::`` in torch18."""
    stored18, printed18 = torch18
    assert any(s.startswith("void at::native::reduce_kernel<") for s in STORED + stored18)
    assert {p.split("reduce_kernel<")[0] for p in PRINTED if "reduce_kernel<" in p} == {"void native::"}
    assert {p.split("reduce_kernel<")[0] for p in printed18 if "reduce_kernel<" in p} == {"void at::"}
    c59 = scope_counts([strip_literal_casts(s) for s in STORED])
    c18 = scope_counts([strip_literal_casts(s) for s in stored18])
    assert c59["native"] < c59["at"] and c18["native"] == c18["at"]  # a tie keeps the outer one


def test_scope_counts_of_names59() -> None:
    """Distinct kernel names holding each scope in any chain: why ``at_cuda_detail`` (a tie with
    ``cub``, the outer one wins) beats ``cub`` and ``detail``, and ``native`` loses to ``at``."""
    counts = scope_counts([strip_literal_casts(s) for s in STORED])
    scopes = ("at_cuda_detail", "cub", "detail", "at", "cuda", "native", "std", "__4")
    assert {s: counts[s] for s in scopes} == {
        "at_cuda_detail": 16, "cub": 16, "detail": 21, "at": 26, "cuda": 16, "native": 22, "std": 8, "__4": 5}


@pytest.mark.parametrize(("stored_part", "printed_part"), [
    # Chains kept at their rarest scope, wherever they stand: kernel name, template argument, parameter.
    ("at_cuda_detail::cub::detail::identity_decomposer_t>", "at_cuda_detail::identity_decomposer_t>"),
    ("at_cuda_detail::cub::detail::vsmem_t)", "at_cuda_detail::vsmem_t)"),
    ("at_cuda_detail::cub::detail::scan_by_key::DeviceScanByKeyKernel<",
     "scan_by_key::DeviceScanByKeyKernel<"),
    ("at::native::templates::cuda::normal_kernel<", "templates::normal_kernel<"),
    ("at::native::mbtopk::computeDigitCumSum(", "mbtopk::computeDigitCumSum("),
    ("cuda::std::__4::__identity>", "__4::__identity>"),
    ("at::cuda::detail::TensorInfo<", "cuda::TensorInfo<"),
    # Casts: dropped on non-negative literals (enums too), kept on negative ones.
    ("<(int)-2, (int)-1, (int)16, (int)16, float", "<(int)-2, (int)-1, 16, 16, float"),
    ("(int)2, (int)-1, (at::cuda::CUDAHistogramMemoryType)0, bool", "2, (int)-1, 0, bool"),
    ("std::array<char *, (unsigned long)1>", "std::array<char *, 1>"),
])
def test_names59_parts(stored_part: str, printed_part: str) -> None:
    got = simplify_names(STORED)
    hits = [i for i, s in enumerate(STORED) if stored_part in s]
    assert hits
    for i in hits:
        assert printed_part in PRINTED[i] and printed_part in got[i]


def test_negative_literal_casts_are_kept() -> None:
    assert strip_literal_casts("k<(int)-1, (long)-3, (int)4, (bool)1>") == "k<(int)-1, (long)-3, 4, 1>"
    printed = [p for p in PRINTED if re.search(r"\(int\)-\d", p)]
    assert len(printed) == 2 and not any(re.search(r"\(\w+\)\d", p) for p in printed)
