"""The declared registry of finding rules: every rule's id, title, source and where its code is.

One findings engine runs these (``findings_for`` / ``overview``); the Summary view, the Findings
tab, ``kernelscope findings`` and ``kernelscope summary`` all show its results. The code of a rule is
named by ``module:function`` and imported only when the rule runs, so reading the registry is cheap
and imports no rule module.

To add a rule: write ``rule_x(ctx) -> list[Finding]`` in ``findings/nsys*.py`` (or a new module),
add a :class:`Rule` here, and a test in ``tests/engine/analysis/test_findings.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    """One rule.

    Attributes:
        id: the finding id it produces (a prefix ending in ``*`` for a family, e.g. ``ncu.*``).
        title: what it looks for.
        source: "capture", "nsys", "ncu" or "telemetry".
        input: what it reads: "trace" (nsys/Kineto, with its summary), "ncu" (an ncu report) or
            "telemetry" (an NVML recording).
        code: ``module:function``.

    """

    id: str
    title: str
    source: str
    input: str
    code: str

    def load(self) -> Callable[..., Any]:
        """The rule's function."""
        module, _, name = self.code.partition(":")
        fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return fn


_NSYS = "engine.analysis.findings.nsys"
_TIME = "engine.analysis.findings.nsys_time"
_TORCH = "engine.analysis.findings.pytorch"

#: Every rule, in the order they run.
RULES: tuple[Rule, ...] = (
    Rule("capture.incomplete", "The capture is incomplete (API calls but no kernels)", "capture", "trace",
         f"{_NSYS}:rule_capture_incomplete"),
    Rule("nsys.per-iteration-alloc", "Memory allocated and freed in every step", "nsys", "trace",
         f"{_NSYS}:rule_per_iteration_alloc"),
    Rule("nsys.pageable-copies", "Copies from or to pageable host memory", "nsys", "trace",
         f"{_NSYS}:rule_pageable_copies"),
    Rule("nsys.sync-copies", "Synchronous copies serialize the host and the GPU", "nsys", "trace",
         f"{_NSYS}:rule_sync_copies"),
    Rule("nsys.no-copy-compute-overlap", "Copies and kernels never overlap", "nsys", "trace",
         f"{_NSYS}:rule_copy_compute_overlap"),
    Rule("nsys.default-stream", "The legacy default stream serializes other streams", "nsys", "trace",
         f"{_NSYS}:rule_default_stream"),
    Rule("nsys.launch-bound", "Kernels shorter than their launch, with GPU idle time", "nsys", "trace",
         f"{_TIME}:rule_launch_bound"),
    Rule("nsys.gpu-idle", "The GPU idle inside the steady steps (warm-up: one-time)", "nsys", "trace",
         f"{_TIME}:rule_gpu_idle"),
    Rule("nsys.sync-idle", "The GPU idle after blocking synchronizations inside the steps", "nsys", "trace",
         f"{_TIME}:rule_sync_idle"),
    Rule("nsys.setup-dominates", "One-time setup dominating a short run", "nsys", "trace",
         f"{_TIME}:rule_setup_dominates"),
    Rule("nsys.expert.*", "nsys analyze rules: memset sync, API sync, GPU gaps, GPU time utilization",
         "nsys", "trace", f"{_TIME}:rule_expert"),
    Rule("torch.cuda-core-math", "Matrix math on CUDA cores instead of tensor cores", "nsys", "trace",
         f"{_TORCH}:rule_cuda_core_math"),
    Rule("torch.item-sync", "Host reads of GPU values (.item()) that stall the GPU", "nsys", "trace",
         f"{_TORCH}:rule_item_sync"),
    Rule("torch.unfused-elementwise", "Chains of element-wise kernels one fused kernel would do", "nsys",
         "trace", f"{_TORCH}:rule_unfused_elementwise"),
    Rule("torch.memory-fragmentation", "Reserved GPU memory far above what tensors use", "nsys", "trace",
         f"{_TORCH}:rule_memory_fragmentation"),
    Rule("ncu.*", "Nsight Compute rules: bottleneck, roofline, occupancy, memory, ncu's estimates", "ncu",
         "ncu", "engine.analysis.findings.ncu_all:ncu_findings"),
    Rule("telemetry.*", "NVML telemetry: throttling, co-tenants, idle GPU", "telemetry", "telemetry",
         "engine.analysis.findings.telemetry:telemetry_findings"),
)


def rules(input_kind: str | None = None) -> tuple[Rule, ...]:
    """The registered rules, optionally only those reading ``input_kind``."""
    return tuple(r for r in RULES if input_kind is None or r.input == input_kind)


def rule_for(finding_id: str) -> Rule | None:
    """The rule that produces ``finding_id`` (exact id, or the family's ``prefix.*``)."""
    for r in RULES:
        if r.id == finding_id or (r.id.endswith("*") and finding_id.startswith(r.id[:-1])):
            return r
    return None
