#!/usr/bin/env bash
# Build (once) and install llama-cpp-python with CPU flags chosen for this machine.
#
# Why: a plain `pip install llama-cpp-python` compiles with -march=native, and on
# some CPUs that advertise AMX the result crashes on the first multi-token decode.
# We turn GGML_NATIVE off and name each instruction set the CPU really lists in
# /proc/cpuinfo (AVX2 at least, AVX-512 where present, never AMX).  The wheel is
# kept in a cache keyed by version + flags, so a second setup (or a fresh clone on
# the same machine) installs it in seconds, and a wheel built with other flags is
# never reused.  pip's own wheel cache is bypassed with --no-cache-dir.
#
# Usage: scripts/build_llama.sh PYTHON   (the interpreter of the target venv)
set -euo pipefail

PYTHON=${1:?usage: build_llama.sh PYTHON}
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
CACHE_ROOT=${DEEPSEARCH_CACHE:-$HOME/.cache/deepsearch-lab}

cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $cpu_flags == *" $1 "* ]]; }

# The multimodal library (mtmd: images and audio) is left out: the lab's models read text only,
# and llama_cpp imports it only for multimodal chat handlers.  That shortens the one build.
# /proc/cpuinfo flag -> ggml CMake option
cmake_args=(-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI \
            avx512f:AVX512 avx512_vnni:AVX512_VNNI avx512vbmi:AVX512_VBMI avx512_bf16:AVX512_BF16; do
  flag=${pair%%:*} option=${pair##*:}
  if has "$flag"; then cmake_args+=("-DGGML_${option}=ON"); else cmake_args+=("-DGGML_${option}=OFF"); fi
done
if ! has avx2; then
  echo "warning: this CPU lacks AVX2; llama.cpp will be slow (building without it)." >&2
fi

key=$(printf '%s %s' "$VERSION" "${cmake_args[*]}" | sha256sum | cut -c1-16)
wheel_dir="$CACHE_ROOT/wheels/llama-cpp-python-$VERSION-$key"
mkdir -p "$wheel_dir"
printf '%s\n' "${cmake_args[@]}" > "$wheel_dir/FLAGS.txt"

installed_key=$("$PYTHON" -c 'import llama_cpp, pathlib; p = pathlib.Path(llama_cpp.__file__).with_name("BUILD_KEY"); print(p.read_text().strip() if p.exists() else "")' 2>/dev/null || true)
if [[ $installed_key == "$key" ]]; then
  echo "llama-cpp-python $VERSION ($key) already installed."
  exit 0
fi

if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "Building llama-cpp-python $VERSION with: ${cmake_args[*]}"
  echo "(once per machine: about 2 minutes on 2 recent cores, 10 or more on older ones)"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) CMAKE_ARGS="${cmake_args[*]}" \
    "$PYTHON" -m pip wheel --no-cache-dir --no-deps "llama-cpp-python==$VERSION" -w "$wheel_dir.tmp"
  mv "$wheel_dir.tmp"/llama_cpp_python-*.whl "$wheel_dir"/ && rmdir "$wheel_dir.tmp"
fi

"$PYTHON" -m pip install --no-cache-dir --force-reinstall --no-deps "$wheel_dir"/llama_cpp_python-*.whl
# Runtime dependencies of llama-cpp-python (and its [server] extra) come from pyproject.toml.
"$PYTHON" - "$key" <<'PY'
import pathlib, sys, llama_cpp
pathlib.Path(llama_cpp.__file__).with_name("BUILD_KEY").write_text(sys.argv[1] + "\n")
PY
echo "llama-cpp-python $VERSION installed from $wheel_dir"
