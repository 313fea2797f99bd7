// Run 18 (llama.cpp, one H200): a fresh process's first cuBLAS GEMM against its steady calls, as ggml-cuda makes them
// past mmf's 16 columns (ggml_cuda_mul_mat_cublas_impl<GGML_TYPE_F16> at 0c1e570: cublasGemmEx, F16 weights
// transposed x F16 activations -> F16, CUBLAS_COMPUTE_16F, then a conversion to F32; here without the conversions).
// Prints one JSON line of seconds: the context (cudaFree(0)), cublasCreate, and per (m, n) call in order its wall.
// Hypothesis (h200-llamacpp-run18-predicted.json): the first GEMM of a process costs 80-120 ms beyond a steady one,
// runs 14-15's first batched-bench configuration's excess over the model.
// Build: nvcc -O2 -arch=sm_90a -o cublas_first_call cublas_first_call.cu -lcublas
#include <chrono>
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main() {
    const int k = 4096, shapes[][2] = {{4096, 512}, {4096, 512}, {14336, 512}, {14336, 512}, {4096, 17}, {4096, 17},
                                       {4096, 24}, {4096, 24}, {14336, 24}, {14336, 24}};
    double t0 = now();
    cudaFree(0);
    double t_ctx = now() - t0;
    half *a, *b, *c;
    cudaMalloc(&a, sizeof(half) * (size_t)k * 14336);
    cudaMalloc(&b, sizeof(half) * (size_t)k * 512);
    cudaMalloc(&c, sizeof(half) * (size_t)14336 * 512);
    cudaMemset(a, 0, sizeof(half) * (size_t)k * 14336);
    cudaMemset(b, 0, sizeof(half) * (size_t)k * 512);
    cudaDeviceSynchronize();
    cublasHandle_t h;
    t0 = now();
    cublasCreate(&h);
    double t_create = now() - t0;
    const half alpha = __float2half(1.0f), beta = __float2half(0.0f);
    printf("{\"context_s\": %.6f, \"create_s\": %.6f, \"calls\": [", t_ctx, t_create);
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); ++i) {
        int m = shapes[i][0], n = shapes[i][1];
        t0 = now();
        cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16F, k, b, CUDA_R_16F,
                                         k, &beta, c, CUDA_R_16F, m, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
        cudaDeviceSynchronize();
        printf("%s{\"m\": %d, \"n\": %d, \"s\": %.6f, \"status\": %d}", i ? ", " : "", m, n, now() - t0, (int)st);
    }
    printf("]}\n");
    cublasDestroy(h);
    return 0;
}
