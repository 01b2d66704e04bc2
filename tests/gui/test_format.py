from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gui import format as fmt


def test_duration():
    assert fmt.duration(251_962_483) == "252.0 ms"
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
