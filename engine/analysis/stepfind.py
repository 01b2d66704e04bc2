"""Steps of one process from its GPU work: the finder lives in :mod:`engine.analysis.steps`.

Its functions are re-exported here for the callers that import them from this module
(``steps_per_process`` calls the finder, so one module holds both: no steps <-> stepfind cycle).
"""

from __future__ import annotations

from engine.analysis.steps import ALIGN_SHARE as ALIGN_SHARE
from engine.analysis.steps import gpu_steps as gpu_steps
from engine.analysis.steps import no_steps_reason as no_steps_reason
from engine.analysis.steps import nvtx_steps_on_gpu as nvtx_steps_on_gpu
from engine.analysis.steps import repeat_of as repeat_of
from engine.analysis.steps import shifted_steps as shifted_steps
from engine.analysis.steps import typical_unit as typical_unit
