#!/usr/bin/env bash
# Run plans/gpu-lease.toml on a lent NVIDIA machine that can reach no package index, and leave the records
# and logs under $OUT (the workplace's device tool sends this checkout there and brings $OUT back).
#
# What travels beside the checkout: the ignored folder .dev, named in the tool's `carry`, as
# tools/build_llama_cuda.sh leaves it: llama_cpp_cuda.tar.xz (llama-cpp-python with the CUDA backend),
# wheels/ (pure Python packages the machine's image lacks: gguf, diskcache), libcudart.so.13 of the toolkit
# the build used and libgomp.so.1 (these two are found only after the image's own libraries).
# cuBLAS comes from the image (its PyTorch's nvidia-cublas wheel): 500 MB would not travel.
#
# Usage there:  OUT=/some/dir bash tools/device_lease.sh [seconds for the sweep, default 520]
set -u
OUT=${OUT:?set OUT to the folder that comes back}
BUDGET_S=${1:-520}
PLAN=${PLAN:-plans/gpu-lease.toml}
export PYTHONUNBUFFERED=1
START=$(date +%s)
log() { echo "[$(( $(date +%s) - START ))s] $*"; }

ENV_TXT=$OUT/environment.txt  # what the machine is and what loaded (at most 8 files come back: keep few)
{
  log "machine: $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
  df -h /tmp "$PWD" | tail -n +2
} 2>&1 | tee "$ENV_TXT"

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/wheels/*.whl \
  && tar -xJf .dev/llama_cpp_cuda.tar.xz -C /tmp/site || { log "install failed"; exit 2; }
export PYTHONPATH=/tmp/site:$PWD

# the image's CUDA libraries (cuBLAS, cuBLASLt) from its Python packages, then what travelled
CUBLAS_DIR=$(python3 - <<'EOF'
import glob, sys
roots = [f"{p}/nvidia/**" for p in sys.path] + ["/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/*/lib"]
hits = [h for r in roots for h in sorted(glob.glob(f"{r}/libcublas.so.1[0-9]*", recursive=True))]
print(hits[0].rsplit("/", 1)[0] if hits else "")
EOF
)
log "cuBLAS from: ${CUBLAS_DIR:-none found}"
export LD_LIBRARY_PATH=${CUBLAS_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$PWD/.dev

log "cuBLAS from: ${CUBLAS_DIR:-none found}" >> "$ENV_TXT"
ldd /tmp/site/llama_cpp/lib/libggml-cuda.so >> "$ENV_TXT" 2>&1
set -o pipefail
python3 - <<'EOF' 2>&1 | tee -a "$ENV_TXT" || { log "llama_cpp does not load"; cat "$ENV_TXT"; exit 3; }
import llama_cpp
print("llama_cpp", llama_cpp.__version__, "gpu offload:", bool(llama_cpp.llama_supports_gpu_offload()))
assert llama_cpp.llama_supports_gpu_offload(), "this llama-cpp-python build has no GPU backend"
EOF

log "sweep: $PLAN for at most ${BUDGET_S} s"
# synthetic models (~45 GB): on whichever of /tmp and this checkout's disk has more room
ROOM=$(df --output=avail,target /tmp "$PWD" | tail -n +2 | sort -n | tail -1 | awk '{print $2}')
CACHE=${ROOM%/}/fitbench-models
log "model cache: $CACHE" | tee -a "$ENV_TXT"
mkdir -p "$OUT/results" "$CACHE"
timeout -s TERM -k 20 "$BUDGET_S" python3 -m harness measure --plan "$PLAN" \
  --results "$OUT/results" --cache "$CACHE" --no-progress > "$OUT/measure.log" 2>&1
log "sweep exit: $?"
tail -n 40 "$OUT/measure.log"
ls -la "$OUT/results/runs" 2>/dev/null
log "done"
