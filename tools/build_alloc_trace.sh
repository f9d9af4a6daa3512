#!/usr/bin/env bash
# Build a copy of the installed llama-cpp-python whose ggml-base prints every allocation of ggml's graph
# allocator (ggml/src/ggml-alloc.c: its AT_PRINTF debug lines, off in release builds), for
# tools/alloc_trace.py.  Only ggml-base is rebuilt, from the same llama-cpp-python source release that
# `make install-llama` builds; the copy lives apart (OUT_DIR/llama_cpp) and is used only through PYTHONPATH,
# so the installed package is untouched.  About 2 minutes on 2 cores (the source download and ggml-base).
#
#   bash tools/build_alloc_trace.sh [OUT_DIR=~/.cache/fitbench/alloc-trace]
set -euo pipefail
OUT_DIR=$(realpath -m "${1:-$HOME/.cache/fitbench/alloc-trace}")
LLAMA_CPP_PYTHON=${LLAMA_CPP_PYTHON:-llama-cpp-python==0.3.36}
VERSION=${LLAMA_CPP_PYTHON#llama-cpp-python==}
WORK=${WORK:-/tmp/fitbench-alloc-trace-build}
PYTHON=${PYTHON:-python3}

installed=$("$PYTHON" -c "import llama_cpp; print(llama_cpp.__version__)" 2>/dev/null || true)
if [ "$installed" != "$VERSION" ]; then
  echo "llama-cpp-python $VERSION is not the installed one (${installed:-none}): run \`make install-llama\`" >&2
  exit 1
fi
PKG=$("$PYTHON" -c "import llama_cpp, os; print(os.path.dirname(llama_cpp.__file__))")

mkdir -p "$WORK"
SRC=$WORK/llama_cpp_python-$VERSION
if [ ! -d "$SRC/vendor/llama.cpp/ggml" ]; then
  "$PYTHON" -m pip download -q --no-deps --no-binary :all: -d "$WORK" "$LLAMA_CPP_PYTHON"
  tar -xzf "$WORK/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
fi
ALLOC=$SRC/vendor/llama.cpp/ggml/src/ggml-alloc.c
# the release build defines AT_PRINTF as nothing; print to stderr instead (once)
if ! grep -q "fitbench alloc trace" "$ALLOC"; then
  "$PYTHON" - "$ALLOC" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
old = "#define AT_PRINTF(...)\n"
if s.count(old) != 1:
    sys.exit(f"{p}: the AT_PRINTF definition this script patches is not there (another llama.cpp?)")
new = "#include <stdio.h>\n#define AT_PRINTF(...) fprintf(stderr, __VA_ARGS__) /* fitbench alloc trace */\n"
open(p, "w").write(s.replace(old, new))
EOF
fi
cmake -S "$SRC/vendor/llama.cpp" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF > "$WORK/cmake.log"
cmake --build "$WORK/build" --target ggml-base -j "$(nproc)" > "$WORK/build.log"

rm -rf "$OUT_DIR/llama_cpp" && mkdir -p "$OUT_DIR"
cp -r "$PKG" "$OUT_DIR/llama_cpp"
built=$(ls "$WORK"/build/bin/libggml-base.so.*.*.* | head -1)
for f in "$OUT_DIR"/llama_cpp/lib/libggml-base.so*; do cp "$built" "$f"; done
echo "$OUT_DIR"
