from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gui import format as fmt


def test_duration():
    assert fmt.duration(251_962_483) == "251.96 ms"  # as the CLI prints it: one formatter
    assert fmt.duration(850) == "850 ns"
    assert fmt.duration(65_271) == "65.3 µs"
    assert fmt.duration(1_613_500_000) == "1.61 s"
    assert fmt.duration(None) == "–"


def test_cells():
    assert fmt.cell(np.int64(15878818)) == "15,878,818"
    assert fmt.cell(3175763.6) == "3,175,763.6"
    assert fmt.cell(268.435, 3) == "268.435"
    assert fmt.cell(1234, separators=False) == "1234"
    assert fmt.cell(float("nan")) == ""
    assert fmt.cell(pd.NA) == ""
    assert fmt.cell("sgemm") == "sgemm"
    assert fmt.is_missing(pd.NA) and fmt.is_missing(math.nan) and not fmt.is_missing(0)
    assert fmt.nbytes(83_886_080) == "83.9 MB"
    assert fmt.percent(39.83) == "39.8 %"


def test_human_value_scales_ncu_base_units():
    # the values the Kernels view showed in base units (issue 12)
    assert fmt.human_value(1_951_778_318.13, "hz") == "1.95 GHz"
    assert fmt.human_value(195_991_064_780.34, "byte/s") == "195.99 GB/s"
    assert fmt.human_value(1_250_766_917_293.2, "byte/s") == "1.25 TB/s"
    assert fmt.human_value(46_816.0, "ns") == "46.8 µs"
    assert fmt.human_value(58_555_904, "byte") == "58.6 MB"
    assert fmt.human_value(134_144, "byte/block") == "134.1 kB/block"
    assert fmt.human_value(83_994, "cycle") is None  # counts keep ncu's text
    assert fmt.human_value(None, "hz") is None and fmt.human_value(math.nan, "hz") is None


def test_seconds_text():
    assert fmt.seconds_text(0.85) == "850.00 ms"
    assert fmt.seconds_text(185) == "3 min 05 s"
    assert fmt.seconds_text(3720) == "1 h 02 min"
