"""Shared test helpers: tiny random-init models, console scripts run as a user runs them,
and readers of lm-eval output folders. Test files import it as ``helpers``."""
import glob
import json
import os
import shutil
import subprocess
import sys

FAMILIES = ("llama", "qwen2", "gemma3_text", "gpt_neox")
ENV = {"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


def tiny_model(family: str, seed: int = 0, attn: str = "sdpa", layers: int = 2):
    """A random-init model of ``family``: 4 query heads over 2 key/value heads where the
    family has them; gemma3 alternates a sliding-window (8) and a full-attention layer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
              num_attention_heads=4, max_position_embeddings=512)
    if family != "gpt_neox":
        kw["num_key_value_heads"] = 2
    if family == "gemma3_text":
        kw.update(head_dim=8, sliding_window=8,
                  layer_types=["sliding_attention", "full_attention"] * (layers // 2))
    torch.manual_seed(seed)
    config = AutoConfig.for_model(family, **kw)
    return AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()


def console_script(name):
    """The script installed beside this interpreter (its venv), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.isfile(here) else shutil.which(name)


LM_EVAL = console_script("lm_eval")
DRIFT_EVAL = console_script("drift-eval")


def run_lm_eval(args, env_extra=None, timeout=900):
    """The real ``lm_eval`` command in a subprocess."""
    env = dict(os.environ, **ENV, **(env_extra or {}))
    return subprocess.run([LM_EVAL, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


def run_drift_eval(args, env_extra=None, timeout=900):
    """The real ``drift-eval`` command in a subprocess."""
    env = dict(os.environ, **ENV, **(env_extra or {}))
    return subprocess.run([DRIFT_EVAL or "drift-eval", *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout)


def results_of(out):
    """The one ``results_*.json`` under an ``lm_eval --output_path`` folder."""
    [res_file] = glob.glob(str(out / "*" / "results_*.json"))
    with open(res_file, encoding="utf-8") as fh:
        return json.load(fh)


def samples_of(out, task):
    [samples_file] = glob.glob(str(out / "*" / f"samples_{task}_*.jsonl"))
    with open(samples_file, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# Options of the one real sweep the sweep, report and gate tests share (bundled SmolLM2,
# 2 settings x (2 forced-length answers + 2 fixed-history conversations + 1 position-bias
# measurement), 16 tokens per answer).
REAL_SWEEP_ARGS = ["--settings", "none,log:1",
                   "--tasks", "drift_french_single,drift_french_multiturn_fixed,position_bias",
                   "--limit", "2", "--gen-kwargs", "max_gen_toks=16", "--batch-size", "2",
                   "--metadata", '{"length": 8, "sequences": 1}']


def tiny_chat_model(folder, source_dir, seed=0, layers=1, chat_template=True):
    """A random-init model with a real chat tokenizer (``source_dir``'s, e.g. the bundled
    SmolLM2), saved to ``folder``: a model that lm-eval and the sweep treat like any chat
    model but that generates in milliseconds. Returns ``folder`` as a string."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(source_dir)
    config.update(dict(hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=8,
                       initializer_range=0.2))  # wide enough that greedy answers vary with the prompt
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(source_dir)
    if not chat_template:
        tok.chat_template = None
    tok.save_pretrained(folder)
    return str(folder)


def png_pixels(path):
    """The (r, g, b) pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's
    --screenshot writes), row by row."""
    import struct
    import zlib

    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride, prev, out = zlib.decompress(idat), width * bpp, bytearray(width * bpp), []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += [tuple(line[i:i + 3]) for i in range(0, stride, bpp)]
        prev = line
    return out
