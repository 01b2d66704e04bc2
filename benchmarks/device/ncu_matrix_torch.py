"""A small PyTorch program for the ncu flag matrix (benchmarks/device/record_ncu_matrix.sh).

Inside the NVTX range ``torch_matrix``: a bf16 SDPA (flash attention), a bf16 GEMM (cuBLAS), and
ATen element-wise, reduction, softmax, layer-norm and scan kernels, so that the kernel names hold
``at::native::<unnamed>::`` templates, lambdas with ``const`` call operators and CUB namespaces.
The inputs are made (``torch.randn``: distribution kernels) before the range.
"""

import torch
import torch.nn.functional as F


def main() -> None:
    """Run each operation once inside the range and print a checksum."""
    torch.manual_seed(0)
    dev = "cuda"
    q = torch.randn(2, 4, 256, 64, device=dev, dtype=torch.bfloat16)
    a = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
    x = torch.randn(2048, 1024, device=dev)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("torch_matrix")
    outs = [
        F.scaled_dot_product_attention(q, q, q),
        a @ a,
        F.gelu(x),
        x + 1.0,
        x.sum(dim=-1),
        torch.softmax(x, dim=-1),
        F.layer_norm(x, (1024,)),
        torch.cumsum(x[:4, :], dim=1),
    ]
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print("ok", len(outs), "ops", float(sum(o.float().sum() for o in outs)))


if __name__ == "__main__":
    main()
