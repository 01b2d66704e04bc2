"""find_repeat on steps whose inputs cycle, against micro-batches and halves of a step.

A training loop that takes its sequence lengths in turn (8 lengths: 512, 384, ...) runs other GEMM
kernels in each step of the cycle, so the GPU's exact repeat is 8 steps long; each step still holds
its own copy and its own optimizer update, which micro-batches of an accumulated step (one update
for 4 copies) and halves of a step do not. The H200 recording that found it: the PyTorch workbench's
base TinyGPT with 6 layers, 300 steps (issue 26's held-out `big_base6tc_300`: 37 "steps" of 266 ms
before, 299 of 32.8 ms now, the program's CUDA events say 32.8 ms).
"""

from __future__ import annotations

import numpy as np

from engine.analysis import iterations as it

COPY_IN = it._COPY + 1
OPT, ELT, LOSS = 50, 60, 70
GEMMS = 100  # GEMMS + v: the GEMM variant of sequence length v


def _sequence(units: list[list[int]]) -> it.OpSequence:
    tok = np.array([t for u in units for t in u], dtype=np.int64)
    n = len(tok)
    launch = np.arange(n, dtype=np.int64) * 1_000
    names = {int(t): ("multi_tensor_apply_kernel" if t == OPT else "memcpy HtoD" if t == COPY_IN
                      else f"kernel_{t}") for t in np.unique(tok).tolist()}
    return it.OpSequence("1", np.arange(n, dtype=np.int64), tok, launch, launch + 100, launch + 900, names)


def _step(variant: int, optimizer: bool = True) -> list[int]:
    body = [GEMMS + variant, ELT, ELT + 1, GEMMS + variant, ELT + 2] * 4 + [LOSS]
    return [COPY_IN, *body, *([OPT, OPT + 1] if optimizer else [])]


def test_steps_whose_inputs_cycle_are_steps_not_the_cycle() -> None:
    seq = _sequence([_step(i % 8) for i in range(48)])
    rep, _bare = it.find_repeat(seq)
    assert rep is not None
    assert rep.period_ops == len(_step(0)) and rep.count >= 46
    assert rep.anchors == ("copy", "optimizer")


def test_micro_batches_of_an_accumulated_step_stay_one_step() -> None:
    # 4 micro-batches, each with its copy; only the last updates the weights
    units = [_step(0, optimizer=i % 4 == 3) for i in range(48)]
    rep, _bare = it.find_repeat(_sequence(units))
    assert rep is not None
    assert rep.period_ops == 4 * len(_step(0, optimizer=False)) + 2 and rep.count >= 11


def test_halves_of_a_step_stay_one_step() -> None:
    # the copy in the first half, the optimizer in the second; the marker (a GEMM) cuts both halves
    half_a = [COPY_IN, GEMMS, ELT, ELT, ELT + 1]
    half_b = [GEMMS, ELT + 2, ELT + 2, OPT, OPT + 1]
    rep, _bare = it.find_repeat(_sequence([half_a + half_b for _ in range(48)]))
    assert rep is not None and rep.period_ops == 10


def test_micro_batches_over_a_longer_cycle_of_lengths_stay_one_step() -> None:
    # 3 micro-batches a step, each the next of 8 lengths: alike micro-batches in a cycle of 24 that no
    # short test sees; only every third updates the weights, so the step is 3 of them
    units = [_step(m % 8, optimizer=m % 3 == 2) for m in range(96)]
    rep, _bare = it.find_repeat(_sequence(units))
    assert rep is not None
    assert rep.period_ops == 3 * len(_step(0, optimizer=False)) + 2 and rep.count >= 30
