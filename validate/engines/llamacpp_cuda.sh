# Sourced by llamacpp_common.sh (the llama.cpp drivers): `cuda_flags` sets CUDA_FLAGS, the cmake arguments ggml-cuda needs beyond the toolkit.
# ggml-cuda links CUDA::cublas and CUDA::cublasLt (ggml/src/ggml-cuda/CMakeLists.txt:178), which FindCUDAToolkit
# creates only when the toolkit beside nvcc holds cuBLAS. A toolkit without it (this project's CPU machine: "Unable to
# find cublas_v2.h in either /usr/local/cuda/include ...") takes the nvidia-cublas wheel's instead, found under
# python3's site-packages (CUDA 13 wheels: nvidia/cu13/include, nvidia/cu13/lib) or LLAMACPP_NVIDIA_SITE: the
# libraries as FindCUDAToolkit's cache entries, the headers as -I, the folder on LD_LIBRARY_PATH for the binaries.
# ggml-cuda also links CUDA::cuda_driver (line 184, for its VMM memory pool): the driver's libcuda.so.1 as ldconfig
# lists it is given as that entry; with none (no GPU here) GGML_CUDA_NO_VMM=ON, which the device run must not need.
# NCCL off: one GPU.
cuda_flags() {
  CUDA_FLAGS=(-DGGML_CUDA_NCCL=OFF)
  local nvcc_dir inc lib sites drv
  drv=$(ldconfig -p 2>/dev/null | grep -o '/[^ ]*/libcuda\.so\.1$' | head -1)
  if [ -n "$drv" ]; then CUDA_FLAGS+=("-DCUDA_cuda_driver_LIBRARY=$drv"); echo "driver: $drv"
  else CUDA_FLAGS+=(-DGGML_CUDA_NO_VMM=ON); echo "driver: no libcuda.so.1 (GGML_CUDA_NO_VMM=ON)"; fi
  nvcc_dir=$(dirname "$(command -v nvcc)")
  for inc in "$nvcc_dir/../include" "$nvcc_dir"/../targets/*/include; do
    [ -f "$inc/cublas_v2.h" ] && { echo "cuBLAS: the toolkit's ($inc)"; return 0; }
  done
  sites="${LLAMACPP_NVIDIA_SITE:-} $(python3 -c 'import site; print(*site.getsitepackages())' 2>/dev/null)"
  inc=$(for s in $sites; do ls -d "$s"/nvidia/*/include 2>/dev/null; done | while read -r d; do
    [ -f "$d/cublas_v2.h" ] && echo "$d"; done | head -1)
  [ -n "$inc" ] || { echo "cuBLAS: none beside nvcc nor in site-packages ($sites)"; return 1; }
  lib=$(cd "$inc/../lib" && pwd)
  CUDA_FLAGS+=("-DCUDA_cublas_LIBRARY=$(ls "$lib"/libcublas.so* | head -1)"
               "-DCUDA_cublasLt_LIBRARY=$(ls "$lib"/libcublasLt.so* | head -1)"
               "-DCMAKE_CUDA_FLAGS=-I$inc" "-DCMAKE_CXX_FLAGS=-I$inc")
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "cuBLAS: the wheel's ($inc, $lib)"
}
