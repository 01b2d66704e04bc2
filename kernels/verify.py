"""How close a workload's output is to its reference: one relative error, on any device.

Used by the workloads themselves (``kernels/_common``) and by the benchmark harness.
"""

from __future__ import annotations

import math
from typing import Any

from kernels.registry import WorkloadError


def relative_error(out: Any, ref: Any) -> float:
    """‖out − ref‖₂ / ‖ref‖₂ in float64 (‖out − ref‖₂ when ref is all zeros); NaN if out has NaN/Inf.

    Accepts torch tensors (any device; compared on the output's device in chunks, so a multi-GB
    attention output needs no host copy) or anything numpy can convert.

    Raises:
        WorkloadError: shapes differ.
    """
    if hasattr(out, "detach") and hasattr(ref, "detach"):
        return _relative_error_torch(out, ref)
    import numpy as np

    def arr(x: Any) -> Any:
        if hasattr(x, "detach"):
            x = x.detach().to("cpu").double().numpy()
        return np.asarray(x, dtype=np.float64)

    o, r = arr(out), arr(ref)
    if o.shape != r.shape:
        raise WorkloadError(f"The output has shape {o.shape} but the reference has {r.shape}.")
    if not np.all(np.isfinite(o)):
        return math.nan
    diff = float(np.linalg.norm((o - r).ravel()))
    denom = float(np.linalg.norm(r.ravel()))
    return diff / denom if denom > 0 else diff


def _relative_error_torch(out: Any, ref: Any, chunk: int = 1 << 24) -> float:
    if tuple(out.shape) != tuple(ref.shape):
        raise WorkloadError(f"The output has shape {tuple(out.shape)} but the reference has "
                            f"{tuple(ref.shape)}.")
    o = out.detach().reshape(-1)
    r = ref.detach().reshape(-1)
    diff_sq = ref_sq = 0.0
    for i in range(0, o.numel(), chunk):
        oc = o[i:i + chunk].double()
        rc = r[i:i + chunk].to(oc.device).double()
        if not bool(oc.isfinite().all()):
            return math.nan
        diff_sq += float(((oc - rc) ** 2).sum())
        ref_sq += float((rc * rc).sum())
    diff = math.sqrt(diff_sq)
    return diff / math.sqrt(ref_sq) if ref_sq > 0 else diff
