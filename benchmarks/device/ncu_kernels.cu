// Four kernels with known, different bottlenecks, for Nsight Compute fixtures.
//   nvcc -O3 -arch=sm_90 -lineinfo -o ncu_kernels ncu_kernels.cu
//   ./ncu_kernels MODE      MODE = all | app | range | fork | forkonly | child
// Kernels (each launched once per pass through run_all, inside an NVTX push/pop range "phase_<name>"):
//  sgemm_naive      FP32 SIMT GEMM, 1024^3, one thread per output, no shared memory (16x16 blocks)
//  strided_copy     out[i] = in[i * 32]: each thread of a warp reads a different 128-byte line
//                   (32-float stride), 4M threads: uncoalesced, 32 sectors per request
//  few_blocks_regs  <<<5, 128>>>: only 5 blocks on a 132-SM GPU, each thread keeps 160 floats live
//                   (high register count), pure FMA chains
//  coalesced_copy   float4 grid-stride copy of 256 MiB: near the DRAM bandwidth peak
// Modes:
//  all    the four kernels once (NVTX ranges phase_gemm / phase_strided / phase_fewblocks / phase_copy)
//  app    sgemm_naive and coalesced_copy only, deterministic (for --replay-mode application)
//  range  strided_copy once OUTSIDE, then cudaProfilerStart; strided_copy + coalesced_copy;
//         cudaProfilerStop; then few_blocks_regs OUTSIDE (for --replay-mode range / profile-from-start off)
//  fork   fork() before any CUDA call; the child exec()s this program with MODE=child, which launches
//         coalesced_copy and few_blocks_regs and exits; the parent waits, then launches strided_copy
//         (for --target-processes all / application-only)
//  forkonly  the same without exec: the forked child itself initialises CUDA and launches the kernels
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void sgemm_naive(int n, const float* A, const float* B, float* C) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n && c < n) {
    float acc = 0.f;
    for (int k = 0; k < n; ++k) acc += A[r * n + k] * B[k * n + c];
    C[r * n + c] = acc;
  }
}

__global__ void strided_copy(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[size_t(i) * 32];
}

__global__ void few_blocks_regs(const float* __restrict__ in, float* __restrict__ out, int iters) {
  float v[160];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int j = 0; j < 160; ++j) v[j] = in[(t * 160 + j) & 1023];
  for (int k = 0; k < iters; ++k) {
#pragma unroll
    for (int j = 0; j < 160; ++j) v[j] = fmaf(v[j], v[(j + 1) % 160], v[(j + 7) % 160]);
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 160; ++j) s += v[j];
  out[t] = s;
}

__global__ void coalesced_copy(const float4* __restrict__ in, float4* __restrict__ out, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n4; i += stride) out[i] = in[i];
}

struct Bufs {
  int gn = 1024;                       // GEMM size
  int sn = 1 << 22;                    // strided_copy threads
  size_t cn4 = (256u << 20) / 16;      // coalesced copy: 256 MiB of float4
  float *A, *B, *C, *sin_, *sout, *rin, *rout;
  float4 *cin, *cout;
};

static void alloc(Bufs& b) {
  size_t g = size_t(b.gn) * b.gn * sizeof(float);
  CK(cudaMalloc(&b.A, g)); CK(cudaMalloc(&b.B, g)); CK(cudaMalloc(&b.C, g));
  CK(cudaMalloc(&b.sin_, size_t(b.sn) * 32 * sizeof(float)));
  CK(cudaMalloc(&b.sout, size_t(b.sn) * sizeof(float)));
  CK(cudaMalloc(&b.rin, 1024 * sizeof(float)));
  CK(cudaMalloc(&b.rout, 5 * 128 * sizeof(float)));
  CK(cudaMalloc(&b.cin, b.cn4 * sizeof(float4)));
  CK(cudaMalloc(&b.cout, b.cn4 * sizeof(float4)));
  CK(cudaMemset(b.A, 0, g)); CK(cudaMemset(b.B, 0, g));
  CK(cudaMemset(b.sin_, 0, size_t(b.sn) * 32 * sizeof(float)));
  CK(cudaMemset(b.rin, 0, 1024 * sizeof(float)));
  CK(cudaMemset(b.cin, 0, b.cn4 * sizeof(float4)));
  CK(cudaDeviceSynchronize());
}

static void gemm(Bufs& b) {
  dim3 blk(16, 16), grd((b.gn + 15) / 16, (b.gn + 15) / 16);
  sgemm_naive<<<grd, blk>>>(b.gn, b.A, b.B, b.C);
  CK(cudaGetLastError());
}
static void strided(Bufs& b) { strided_copy<<<(b.sn + 255) / 256, 256>>>(b.sin_, b.sout, b.sn); CK(cudaGetLastError()); }
static void fewblocks(Bufs& b) { few_blocks_regs<<<5, 128>>>(b.rin, b.rout, 2000); CK(cudaGetLastError()); }
static void copy(Bufs& b) { coalesced_copy<<<132 * 16, 256>>>(b.cin, b.cout, b.cn4); CK(cudaGetLastError()); }

static void ranged(const char* name, void (*f)(Bufs&), Bufs& b) {
  nvtxRangePushA(name);
  f(b);
  CK(cudaDeviceSynchronize());
  nvtxRangePop();
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  if (strcmp(mode, "child") == 0) {    // the exec'ed child of "fork" (also runnable on its own)
    Bufs b; alloc(b);
    ranged("child_copy", copy, b);
    ranged("child_fewblocks", fewblocks, b);
    printf("child %d done\n", (int)getpid());
    return 0;
  }
  if (strcmp(mode, "fork") == 0 || strcmp(mode, "forkonly") == 0) {
    bool do_exec = strcmp(mode, "fork") == 0;
    pid_t pid = fork();
    if (pid == 0) {
      if (do_exec) {
        execl("/proc/self/exe", argv[0], "child", (char*)nullptr);
        perror("execl");
        _exit(127);
      }
      Bufs b; alloc(b);
      ranged("child_copy", copy, b);
      ranged("child_fewblocks", fewblocks, b);
      printf("child %d (no exec) done\n", (int)getpid());
      return 0;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    Bufs b; alloc(b);
    ranged("parent_strided", strided, b);
    printf("parent %d done, child status %d\n", (int)getpid(), st);
    return 0;
  }
  Bufs b; alloc(b);
  if (strcmp(mode, "all") == 0) {
    ranged("phase_gemm", gemm, b);
    ranged("phase_strided", strided, b);
    ranged("phase_fewblocks", fewblocks, b);
    ranged("phase_copy", copy, b);
  } else if (strcmp(mode, "app") == 0) {
    ranged("phase_gemm", gemm, b);
    ranged("phase_copy", copy, b);
  } else if (strcmp(mode, "range") == 0) {
    ranged("outside_before", strided, b);
    CK(cudaProfilerStart());
    nvtxRangePushA("profiled_range");
    strided(b);
    copy(b);
    nvtxRangePop();
    CK(cudaProfilerStop());
    CK(cudaDeviceSynchronize());
    ranged("outside_after", fewblocks, b);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  CK(cudaDeviceSynchronize());
  printf("%s done\n", mode);
  return 0;
}
