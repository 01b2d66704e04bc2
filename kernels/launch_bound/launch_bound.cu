// A launch-bound loop of tiny kernels: the workload behind the big-trace benchmarks.
// Each kernel does almost nothing, so the run is dominated by launch overhead (the pattern CUDA
// Graphs or kernel fusion fix). Every 1000 launches: an NVTX range ends, a small pinned D2H copy and
// a pageable H2D copy run, and the stream is synchronized, so every nsys report has rows.
//
//   nvcc -O2 -arch=sm_90 -lnvToolsExt -o launch_bound launch_bound.cu   (CUDA 12: -lnvToolsExt;
//   CUDA 13 ships NVTX v3 header-only: no library needed)
//   ./launch_bound 420000
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void tiny_add(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

__global__ void tiny_scale(float* x, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char** argv) {
    const long launches = argc > 1 ? std::atol(argv[1]) : 420000;
    const int n = 256;
    float* d = nullptr;
    float* pinned = nullptr;
    std::vector<float> pageable(n, 1.0f);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMallocHost(&pinned, n * sizeof(float)));
    CHECK(cudaMemsetAsync(d, 0, n * sizeof(float), s));
    nvtxRangePushA("batch");
    for (long i = 0; i < launches; ++i) {
        if (i % 2 == 0) tiny_add<<<1, n, 0, s>>>(d, n);
        else tiny_scale<<<1, n, 0, s>>>(d, n, 0.5f);
        if ((i + 1) % 1000 == 0) {
            CHECK(cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
            CHECK(cudaMemcpyAsync(d, pageable.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
            CHECK(cudaStreamSynchronize(s));
            nvtxRangePop();
            nvtxRangePushA("batch");
        }
    }
    nvtxRangePop();
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGetLastError());
    std::printf("launched %ld kernels, x[0]=%f\n", launches, pinned[0]);
    cudaFreeHost(pinned);
    cudaFree(d);
    cudaStreamDestroy(s);
    return 0;
}
