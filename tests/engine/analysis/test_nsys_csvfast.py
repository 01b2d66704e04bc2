"""The vectorised CSV writer prints what the reference formatter (output.to_csv) prints.

output.to_csv is the formatter checked byte for byte against nsys's own CSVs; here both format the
same columns: integers with NULLs and negatives, doubles at exact binary ties (bytes/1e6 with
bytes % 1000 == 500), NaN, -0.0, text that needs quoting, and a long last text column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.analysis.nsys.stats.csv_columns import FixedColumn, IntColumn, TextColumn, to_csv_bytes
from engine.analysis.nsys.stats.output import to_csv


def _frame(ints: np.ndarray, null: np.ndarray, fixed: np.ndarray, codes: np.ndarray,
           labels: list[str], tail: np.ndarray, tail_labels: list[str]) -> pd.DataFrame:
    col = pd.array(np.where(null, 0, ints), dtype="Int64")
    col[null] = pd.NA
    return pd.DataFrame({
        "I": col, "F (MB)": fixed,
        "T": [labels[c] if c >= 0 else None for c in codes],
        "Name": [tail_labels[c] if c >= 0 else None for c in tail],
    })


def test_random_columns_print_the_reference_bytes() -> None:
    rng = np.random.default_rng(16)
    n = 50_000
    ints = rng.integers(-(10**12), 10**13, n)
    ints[:36] = [10**k for k in range(18)] + [10**k - 1 for k in range(1, 19)]
    null = rng.random(n) < 0.2
    fixed = rng.random(n) * 1e4 * (rng.random(n) < 0.5) - rng.random(n)
    fixed[rng.random(n) < 0.1] = np.nan
    fixed[:1000] = (rng.integers(0, 10**6, 1000) * 1000 + 500) / 1e6  # ties at the third decimal
    fixed[1000:1002] = [-0.0, -0.0001]
    labels = ["Pageable", 'quote "x", comma', "NVIDIA H100 80GB HBM3 (0)"]
    tail_labels = ["void k<int, 4>(const float *, float *)", "saxpy", "[CUDA memcpy Host-to-Device]"]
    codes = rng.integers(-1, 3, n)
    tail = rng.integers(-1, 3, n)
    got = to_csv_bytes(["I", "F (MB)", "T", "Name"], [
        IntColumn(ints, null), FixedColumn(fixed, 3), TextColumn(codes, labels),
        TextColumn(tail, tail_labels),
    ]).decode()
    assert got == to_csv(_frame(ints, null, fixed, codes, labels, tail, tail_labels))


def test_without_a_text_tail_and_with_one_decimal() -> None:
    values = np.array([0.05, 0.15, 0.25, 1e9 + 0.45, np.nan, 2.5])
    ints = np.arange(6, dtype=np.int64) * 10**9
    got = to_csv_bytes(["Start (ns)", "Avg (ns)"], [IntColumn(ints), FixedColumn(values, 1)]).decode()
    assert got == to_csv(pd.DataFrame({"Start (ns)": ints, "Avg (ns)": values}))
