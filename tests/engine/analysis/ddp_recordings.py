"""The 2-GPU DDP recordings (tests/data/recordings/nsys/ddp, xz-compressed): unpacked once per test run.

Recorded on 2 H100s: torch DDP over NCCL, rank 1 sleeps a known time on the host in every step
(MANIFEST and the ``*_steps_rank<N>.json`` files there say how long and which rank).
"""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import REPO

DDP = REPO / "tests" / "data" / "recordings" / "nsys" / "ddp"
PER_RANK = ("ddp_rank0.sqlite", "ddp_rank1.sqlite")
TORCHRUN = ("ddp_torchrun.sqlite",)
KINETO = ("ddp_kineto_rank0_kineto.json", "ddp_kineto_rank1_kineto.json")
#: recording -> the per-step wall-time file written by the training script itself
STEPS_JSON = {PER_RANK: "ddp_per_rank_steps_rank{}.json", TORCHRUN: "ddp_torchrun_steps_rank{}.json",
              KINETO: "ddp_kineto_steps_rank{}.json"}


def available() -> bool:
    return all((DDP / f"{n}.xz").is_file() for n in (*PER_RANK, *TORCHRUN, *KINETO))


def unpack(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """The recordings ``names`` decompressed into ``folder`` (once)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for n in names:
        dest = folder / n
        if not dest.exists():
            tmp = folder / (n + ".part")
            with lzma.open(DDP / f"{n}.xz") as src, tmp.open("wb") as fh:
                shutil.copyfileobj(src, fh)
            tmp.rename(dest)
        out.append(dest)
    return out


def truth(which: tuple[str, ...], rank: int = 1) -> dict[str, Any]:
    """What the training script wrote for that run: injected_delay_ms, slow_rank, step_ms, ..."""
    return json.loads((DDP / STEPS_JSON[which].format(rank)).read_text())  # type: ignore[no-any-return]
