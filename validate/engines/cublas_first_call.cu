// Run 18 (llama.cpp, one H200): a fresh process's first cuBLAS GEMM against its steady calls, as ggml-cuda makes them
// past mmf's 16 columns (ggml_cuda_mul_mat_cublas_impl<GGML_TYPE_F16> at 0c1e570: cublasGemmEx, F16 weights
// transposed x F16 activations -> F16, CUBLAS_COMPUTE_16F, then a conversion to F32; here without the conversions).
// Prints one JSON line of seconds: the context (cudaFree(0)), cublasCreate, and per (m, n) call in order its wall.
// Hypothesis (h200-llamacpp-run18-predicted.json): the first GEMM of a process costs 80-120 ms beyond a steady one,
// runs 14-15's first batched-bench configuration's excess over the model.
// Mode `ggml` (run 18b): the calls of a llama-batched-bench process as ggml makes them: one 512-row prompt GEMM, then
// at each of n 17, 24, 32 the 8B's five projections (k x m: q/o 4096 x 4096, k/v 4096 x 1024, gate/up 4096 x 14336,
// down 14336 x 4096, lm_head 4096 x 128256), each twice (its first call, then a steady one).
// Build: nvcc -O2 -arch=sm_90a -o cublas_first_call cublas_first_call.cu -lcublas
#include <chrono>
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstring>
#include <vector>

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Shape { int m, n, k; };

int main(int argc, char ** argv) {
    std::vector<Shape> shapes = {{4096, 512, 4096}, {4096, 512, 4096}, {14336, 512, 4096}, {14336, 512, 4096},
                                 {4096, 17, 4096}, {4096, 17, 4096}, {4096, 24, 4096}, {4096, 24, 4096},
                                 {14336, 24, 4096}, {14336, 24, 4096}};
    if (argc > 1 && strcmp(argv[1], "ggml") == 0) {
        shapes = {{4096, 512, 4096}, {4096, 512, 4096}};
        const int km[][2] = {{4096, 4096}, {4096, 1024}, {4096, 14336}, {14336, 4096}, {4096, 128256}};
        for (int n : {17, 24, 32})
            for (auto & p : km) { shapes.push_back({p[1], n, p[0]}); shapes.push_back({p[1], n, p[0]}); }
    }
    const size_t most = (size_t)4096 * 128256;
    double t0 = now();
    cudaFree(0);
    double t_ctx = now() - t0;
    half *a, *b, *c;
    cudaMalloc(&a, sizeof(half) * most);
    cudaMalloc(&b, sizeof(half) * (size_t)14336 * 512);
    cudaMalloc(&c, sizeof(half) * (size_t)128256 * 512);
    cudaMemset(a, 0, sizeof(half) * most);
    cudaMemset(b, 0, sizeof(half) * (size_t)14336 * 512);
    cudaDeviceSynchronize();
    cublasHandle_t h;
    t0 = now();
    cublasCreate(&h);
    double t_create = now() - t0;
    const half alpha = __float2half(1.0f), beta = __float2half(0.0f);
    printf("{\"context_s\": %.6f, \"create_s\": %.6f, \"calls\": [", t_ctx, t_create);
    for (size_t i = 0; i < shapes.size(); ++i) {
        int m = shapes[i].m, n = shapes[i].n, k = shapes[i].k;
        t0 = now();
        cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16F, k, b, CUDA_R_16F,
                                         k, &beta, c, CUDA_R_16F, m, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
        cudaDeviceSynchronize();
        printf("%s{\"m\": %d, \"n\": %d, \"k\": %d, \"s\": %.6f, \"status\": %d}", i ? ", " : "", m, n, k, now() - t0,
               (int)st);
    }
    printf("]}\n");
    cublasDestroy(h);
    return 0;
}
