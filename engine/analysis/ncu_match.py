"""Which Nsight Compute result is this Nsight Systems kernel launch: matched by base name and order.

ncu profiles launches one at a time and numbers its results (``ID``) in launch order; nsys records
every launch. The ``n``-th launch of a kernel in an nsys report (in start order, among kernels of
the same base name) is the ``n``-th result of that kernel in an ncu report of the same run. Names
differ between the two tools (nsys' demangled name, ncu's function name, template arguments), so
both sides are reduced to the kernel's base name first (:func:`base_name`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def base_name(name: str) -> str:
    """A kernel's base name: 'void sgemm_tiled<(int)16>(int, …)' -> 'sgemm_tiled'."""
    s = name.split("(")[0] if not name.startswith("void ") else name[5:].split("(")[0]
    s = s.split("<")[0].strip()
    return s.split(" ")[-1].split("::")[-1] if s else name


def _plain(v: Any) -> Any:
    import numpy as np

    return v.item() if isinstance(v, np.generic) else v


def ncu_result(kernels: pd.DataFrame | None, name: str, short_name: str | None,
               launch_index: int) -> dict[str, Any] | None:
    """The ncu result of the ``launch_index``-th launch of kernel ``name`` in ``kernels``, or None.

    Args:
        kernels: an ncu report's kernel table (``NcuReport.kernels``: 'Kernel Name' or 'Function
            Name', and 'ID', 'Base Name' where the report has them).
        name: the nsys kernel's name (its demangled name).
        short_name: the nsys kernel's short name, matched instead when known.
        launch_index: launches of kernels of the same base name before this one, in start order.

    Returns:
        The result's row as a dict of plain Python values, or None when the kernel was not profiled.

    """
    if kernels is None or not len(kernels):
        return None
    cols = set(kernels.columns)
    name_col = next((c for c in ("Kernel Name", "name", "Function Name") if c in cols), None)
    if name_col is None:
        return None
    want = base_name(short_name or name)
    bases = kernels["Base Name"] if "Base Name" in cols else kernels[name_col].astype(str).map(base_name)
    same = kernels[bases.astype(str).map(lambda b: base_name(b) == want).to_numpy()]
    if "ID" in cols:
        same = same.sort_values("ID", kind="stable")
    if launch_index >= len(same):
        return None
    row = same.iloc[launch_index]
    return {str(k): _plain(v) for k, v in row.items()}


def launch_order(kernels: pd.DataFrame) -> Any:
    """Each row's launch index among the kernels of the same name, in start order (int64 array).

    ``kernels`` is an nsys kernel table with ``start``, ``name`` and ``shortName`` (the short name
    is the key where known); its index is each row's position. The columnar timeline of a big
    report counts one row at a time instead (``TimelineReads.launch_index``: the same key).
    """
    import numpy as np

    out = np.zeros(len(kernels), dtype=np.int64)
    if len(kernels):
        key = kernels["shortName"].where(kernels["shortName"].notna(), kernels["name"]).astype(str)
        order = kernels.assign(_b=key).sort_values("start", kind="stable").groupby("_b").cumcount()
        out[order.index.to_numpy()] = order.to_numpy()
    return out
