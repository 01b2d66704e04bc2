"""Scaled dot-product attention with ``torch.nn.functional.scaled_dot_product_attention``.

The seeds' shapes (q, k, v are [B, H, S, D]):

    python -m kernels.sdpa --param B=32 --param H=8 --param S=512 --param D=64 --param dtype=fp16
    python -m kernels.sdpa --param B=16 --param H=96 --param S=4096 --param D=128
    python -m kernels.sdpa --param B=16 --param H=96 --param S=4096 --param D=64

FLOP per call: 4·B·H·S²·D (QKᵀ and PV, 2 FLOP per multiply-add), halved when causal. The
reference is the textbook softmax(QKᵀ/√D)·V computed in fp32.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from kernels import _common as c
from kernels.registry import Work

#: The fp32 reference computes at most this many bytes of attention scores at a time.
REF_CHUNK_BYTES = 1 << 30


def make(params: dict[str, str]) -> tuple[Any, Any]:
    torch = c.torch_module()
    import torch.nn.functional as F

    dev = c.device_for(params)
    b, h, s, d = (c.int_param(params, x) for x in ("B", "H", "S", "D"))
    dtype = c.dtype_for(params["dtype"])
    causal = params["causal"] == "1"
    g = torch.Generator(device="cpu").manual_seed(0)
    sets = [tuple(torch.randn(b, h, s, d, generator=g).to(dev, dtype) for _ in range(3))
            for _ in range(c.rotate_count(params))]

    def op(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def ref(q: Any, k: Any, v: Any) -> Any:
        # in chunks of heads: the full fp32 score matrix of B=16 H=96 S=4096 would need 103 GB
        out = torch.empty(b * h, s, d, dtype=torch.float32, device=q.device)
        qf, kf, vf = (t.reshape(b * h, s, d) for t in (q, k, v))
        step = max(1, REF_CHUNK_BYTES // (s * s * 4))
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril() if causal else None
        with c.tf32(False):
            for i in range(0, b * h, step):
                q32, k32, v32 = (t[i:i + step].float() for t in (qf, kf, vf))
                scores = q32 @ k32.transpose(-2, -1) / math.sqrt(d)
                if mask is not None:
                    scores = scores.masked_fill(~mask, float("-inf"))
                out[i:i + step] = torch.softmax(scores, dim=-1) @ v32
        return out.reshape(b, h, s, d)

    rot = c.Rotation(sets, op, ref)
    return rot.fn, rot.reference


def work(params: dict[str, str]) -> Work:
    b, h, s, d = (int(params[x]) for x in ("B", "H", "S", "D"))
    flop = 4.0 * b * h * s * s * d * (0.5 if params["causal"] == "1" else 1.0)
    return Work(flop=flop, bytes=float(4 * b * h * s * d * c.dtype_bytes(params["dtype"])))


if __name__ == "__main__":
    sys.exit(c.main("sdpa"))
