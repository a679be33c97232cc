#!/usr/bin/env bash
# One-command setup: virtual environment, pinned packages, llama-cpp-python built
# for this CPU, and both GGUF models assembled and verified.  Safe to re-run: each
# step is skipped when already done (pyproject.toml hash, llama.cpp build key,
# model hash marker).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

if [[ ! -x $VENV/bin/python ]]; then
  echo "==> creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [[ ! -f $stamp ]]; then
  echo "==> installing the pinned packages (first run: a few minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # CPU torch first, so no other package pulls a multi-GB CUDA build
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q -e '.[dev]'
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi

echo "==> llama-cpp-python"
scripts/build_llama.sh "$VENV/bin/python"

echo "==> models"
"$VENV/bin/python" -m helpers models
