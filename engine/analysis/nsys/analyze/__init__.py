"""Expert-system rules over a trace, agreeing with ``nsys analyze`` (Nsight Systems 2025.3).

Each rule looks for one pattern that wastes time (synchronous copies, pageable memory, host
synchronisation, idle GPU stretches), returns the offending records as a table with the columns
``nsys analyze -r <rule> --format csv`` prints, and says in plain words what it found and how to fix
it. The behaviour was worked out from NVIDIA's documented rule descriptions, the oracle CSVs made by
nsys 2025.3 and experiments with ``nsys analyze`` on the fixtures; the code is our own.

What nsys does, in short (the details that decide the output):

* Memory-copy rules join each GPU copy with its runtime call (same ``correlationId`` and process).
  ``cuda_memcpy_async`` takes ``cudaMemcpy*Async*`` calls whose copy has a pageable side;
  ``cuda_memcpy_sync`` takes ``cudaMemcpy*`` calls without ``Async`` except host-to-device copies of
  at most 64,000 bytes (nsys's "64 KB" is decimal) and copies whose source and destination device are
  the same. Driver calls (``cuMemcpy*``) are not considered. Sorted by GPU duration, longest first.
* ``cuda_memset_sync``: ``cudaMemset*`` calls without ``Async`` on pinned or managed memory.
* ``cuda_api_sync``: ``cudaDeviceSynchronize*`` and ``cudaStreamSynchronize*`` calls (not the
  driver's ``cuCtxSynchronize``/``cuStreamSynchronize``, not event synchronisation).
* ``gpu_gaps``: per process and device, idle stretches between GPU operations (kernels, copies,
  memsets) strictly longer than ``gap`` ms; the context shown is that of the operation before the
  gap. Sorted by duration, longest first.
* ``gpu_time_util``: per process and device, the span from the first operation's start to the last
  one's end is cut into ``chunks`` chunks of ``ceil(span / chunks)`` ns (the last one clipped to the
  span); busy time of overlapping operations adds up; chunks under ``threshold`` % are kept, and
  consecutive ones are merged into one row whose percentage is busy time over merged duration. The
  ``rows`` limit takes merged rows in order of their first chunk's index, and the result is then
  sorted by in-use percentage as printed (0.1 %), lowest first, ties in chunk order. The context
  shown is that of the operation that ends last in the group.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze.common import (
    _DECIMALS,
    ALIASES,
    RULE_OPTIONS,
    RULES,
    SMALL_H2D_BYTES,
    RuleResult,
    _resolve_options,
    canonical_rule_name,
    parse_rule_spec,
)
from engine.analysis.nsys.analyze.registry import registry

if TYPE_CHECKING:
    from engine.reports.base import Trace

__all__ = [
    "ALIASES", "RULES", "RULE_OPTIONS", "SMALL_H2D_BYTES", "RuleResult", "canonical_rule_name",
    "parse_rule_spec", "registry", "run", "run_rule", "to_csv",
]


# -- public entry points ---------------------------------------------------------------------------
def run(trace: Trace, name: str, options: dict[str, Any] | None = None) -> RuleResult:
    """Run one expert rule on a trace: the one runner of the CLI, the findings and batch.

    Args:
        trace: an opened report (nsys SQLite export or PyTorch profiler trace).
        name: a rule name from :data:`RULES` (nsys 2022 names such as ``gpu-starv`` work too).
        options: rule options as nsys names them (``rows``, ``start``, ``end``, ``nvtx``, and
            ``gap`` for gpu_gaps, ``threshold``/``chunks`` for gpu_time_util); values may be
            strings, as :func:`parse_rule_spec` returns them.

    Returns:
        The rule's findings; ``result.table`` is empty when nothing was found.

    Raises:
        KernelscopeError: unknown rule or option, or an option value that does not fit.

    """
    rule = canonical_rule_name(name)
    opts = _resolve_options(rule, dict(options or {}))
    return registry()[rule].compute(trace, opts)


def run_rule(trace: Trace, name: str, **options: Any) -> RuleResult:
    """:func:`run` with the options as keywords (``run_rule(trace, "gpu_gaps", gap=100)``)."""
    return run(trace, name, options)


def _cell(value: Any, column: str, na: Any) -> str:
    if value is None or value is na or (isinstance(value, float) and math.isnan(value)):
        return ""
    if column in _DECIMALS:
        return f"{float(value):.{_DECIMALS[column]}f}"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    text = str(value)
    if any(ch in text for ch in ',"\n'):
        text = '"' + text.replace('"', '""') + '"'
    return text


def to_csv(result: RuleResult) -> str:
    """Format a result exactly as ``nsys analyze --format csv`` does.

    Returns:
        The header and one line per row, each ending in a newline; an empty string when the rule
        found nothing (nsys then writes an empty file).

    """
    import pandas as pd

    table = result.table
    if table.empty:
        return ""
    columns = list(table.columns)
    lines = [",".join(columns)]
    for row in table.itertuples(index=False, name=None):
        lines.append(",".join(_cell(v, c, pd.NA) for v, c in zip(row, columns, strict=True)))
    return "\n".join(lines) + "\n"

