"""Numbers and units as ``ncu --print-units base`` prints them, and the conversion of scaled units."""

from __future__ import annotations

import math
import re


def format_number(value: float) -> str:
    """A double as ncu prints it in base units: integers without decimals, others with two."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.2f}"


def format_speedup(value: float) -> str:
    """An estimated speedup as ncu prints it (four significant digits)."""
    return f"{value:.4g}"


_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_TIME_TO_NS = {"ns": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_PER_TIME = {"ns": 1e9, "us": 1e6, "ms": 1e3}


def to_base_unit(unit: str) -> tuple[str, float]:
    """The base unit ncu's ``--print-units base`` uses for a scaled unit, and the factor to it.

    The factor is the one ncu applies (it multiplies by the prefix wherever it sits, so
    ``%/Kbyte`` values are multiplied by 1000, as ncu prints them).
    """
    if unit in _TIME_TO_NS:
        return "ns", _TIME_TO_NS[unit]
    num, sep, den = unit.partition("/")
    factor = 1.0
    m = re.fullmatch(r"([KMGTP])(byte|hz|B)(.*)", num)
    if m:
        factor *= _PREFIX[m.group(1)]
        num = m.group(2) + m.group(3)
    if sep:
        if den in _PER_TIME:
            factor *= _PER_TIME[den]
            den = "s"
        else:
            m = re.fullmatch(r"([KMGTP])(byte|B)", den)
            if m:
                factor *= _PREFIX[m.group(1)]
                den = m.group(2)
    return num + sep + den, factor


def parse_number(text: str) -> float:
    """A number as ncu prints it, with or without locale thousands separators; NaN if not a number."""
    s = text.strip()
    if not s:
        return math.nan
    if re.fullmatch(r"-?\d{1,3}(\.\d{3})+(,\d+)?", s):  # 1.234,5 (decimal comma locales)
        s = s.replace(".", "").replace(",", ".")
    else:
        s = s.replace(",", "")
    try:
        return float(s)
    except ValueError:
        return math.nan


def base_cell(text: str, unit: str) -> tuple[str, str, float]:
    """(base unit, printed text in base units, value) for one CSV cell."""
    value = parse_number(text)
    base, factor = to_base_unit(unit)
    if math.isnan(value):
        return base, text, value
    value *= factor
    if factor != 1.0:
        value = round(value, 6)
    return base, format_number(value), value


def parse_speedup(text: str) -> float:
    """An estimated speedup: ncu prints it with 4 significant digits and no grouping ("6.327")."""
    try:
        return float(text)
    except ValueError:
        return parse_number(text.replace(",", "."))
