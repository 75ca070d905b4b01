"""Shared test helpers: tiny random-init models, console scripts run as a user runs them,
readers of lm-eval output folders, and a byte-level tokenizer with one α scene. Test files
import it as ``helpers``."""
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


def rounding(dtype, n: int, scale: float) -> float:
    """What rounding in ``dtype`` (a torch or NumPy float type) allows between two
    computations of a value of magnitude ``scale`` reached through sums of ``n`` terms in
    all: ``eps · n · scale``, the standard bound for a length-``n`` dot product."""
    import numpy as np

    try:
        import torch

        if isinstance(dtype, torch.dtype):
            return float(torch.finfo(dtype).eps * n * scale)
    except ImportError:
        pass
    return float(np.finfo(dtype).eps * n * scale)


def forward_sums(model, keys: int, logits: bool = True) -> int:
    """``n`` for ``rounding`` after one forward of a decoder over ``keys`` keys: per layer
    the attention's sum over the keys, the hidden size three times (query/key/value, output
    and MLP input projections) and the MLP's intermediate size; then, for the logits, the
    output head's sum over the hidden size."""
    c = model.config
    n = c.num_hidden_layers * (keys + 3 * c.hidden_size + c.intermediate_size)
    return n + c.hidden_size if logits else n


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


def accelerate_lm_eval(args, processes=2, env_extra=None, timeout=1200):
    """``accelerate launch --num_processes N --cpu -m lm_eval ARGS`` in a subprocess."""
    env = dict(os.environ, **ENV, **(env_extra or {}))
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes), "--cpu",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "lm_eval",
           *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


# A Gemma-style chat template: no system role (it raises on one), "model" for the assistant.
NO_SYSTEM_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


def model_with_template(model_dir, target, template):
    """A copy of a model folder (weights linked, not copied) whose tokenizer has
    ``template`` as its chat template, or none when ``template`` is None."""
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(model_dir):
        if name in ("chat_template.jinja", "tokenizer_config.json"):
            continue
        os.symlink(os.path.join(model_dir, name), os.path.join(target, name))
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    config.pop("chat_template", None)
    with open(os.path.join(target, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    if template is not None:
        with open(os.path.join(target, "chat_template.jinja"), "w", encoding="utf-8") as fh:
            fh.write(template)
    return str(target)


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, serving a GGUF file, as a
    context manager: started on a free port, ready when ``/v1/models`` answers, always
    stopped (``.url`` is the chat-completions endpoint; ``.log`` its output)."""

    def __init__(self, gguf_path, log_path, alias="smollm2", n_ctx=2048, timeout=240):
        self.gguf_path, self.log_path, self.alias, self.n_ctx, self.timeout = gguf_path, log_path, alias, n_ctx, timeout
        self.port = free_port()
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def __enter__(self):
        import time
        import urllib.request

        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf_path), "--model_alias", self.alias,
             "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", "1", "--n_threads_batch", "1"],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **ENV))
        log.close()
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}: {self.tail()}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=5) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server not ready after {self.timeout} s: {self.tail()}")
                time.sleep(0.5)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return False

    def tail(self, n=2000):
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-n:]


class CharTokenizer:
    """A byte-level tokenizer for the 128-token tiny models (no special tokens)."""

    pad_token_id = 0
    eos_token_id = 0

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [1 + (ord(ch) % 127) for ch in text]}


TOK = CharTokenizer()
CONTS = [("the river ran past the mill and under the old stone bridge " * 4)[i:] for i in range(0, 20, 4)]
SCENE = {"base": "A red boat left the harbour.", "detail": "A blue boat left the harbour.",
         "translation": "Un bateau rouge a quitté le port."}
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


# A plain lm-eval task (not a drift task) run with the plugin off, on, and beside a drift
# task: what tests/test_guest.py and the server test compare.
PLUGIN_OFF = {"LM_EVAL_DRIFT_AUTOLOAD": "0"}
QUESTIONS = [{"question": "What is the capital of Italy?", "answer": "Rome"},
             {"question": "What is the capital of Spain?", "answer": "Madrid"}]
PLAIN_SAMPLE_KEYS = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash", "prompt_hash",
                     "target_hash", "exact_match")


def plain_task(folder) -> str:
    """A plain lm-eval YAML task on a local JSON-lines file (not a drift task): its folder,
    for ``--include_path``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "capitals.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    (folder / "plain_capitals.yaml").write_text(
        "task: plain_capitals\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        'doc_to_text: "{{question}}"\n'
        'doc_to_target: "{{answer}}"\n'
        'generation_kwargs:\n  until: ["\\n\\n"]\n  do_sample: false\n'
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n",
        encoding="utf-8")
    return str(folder)


def _plain_run(tmp_path, name, model, model_args, tasks, env=None, system=None):
    out = tmp_path / name
    args = ["--model", model, "--model_args", model_args, "--include_path", plain_task(tmp_path / "task"),
            "--tasks", tasks, "--apply_chat_template", "--limit", "2", "--gen_kwargs", "max_gen_toks=24",
            "--output_path", out, "--log_samples", "--seed", "0"]
    if model == "hf":
        args += ["--device", "cpu", "--batch_size", "2"]
    if system:
        args += ["--system_instruction", system]
    r = run_lm_eval(args, env)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def same_as_without_the_plugin(tmp_path, model, model_args, system=None):
    """The plain task alone with the plugin off, alone with it on, and beside
    ``drift_french_single`` with it on: the same prompts, answers and scores."""
    off = _plain_run(tmp_path, "off", model, model_args, "plain_capitals", PLUGIN_OFF, system)
    on = _plain_run(tmp_path, "on", model, model_args, "plain_capitals", None, system)
    mixed = _plain_run(tmp_path, "mixed", model, model_args, "plain_capitals,drift_french_single", None, system)
    want = [{k: s.get(k) for k in PLAIN_SAMPLE_KEYS} for s in samples_of(off, "plain_capitals")]
    assert len(want) == 2 and all(w["resps"][0][0] for w in want)
    for run in (on, mixed):
        assert [{k: s.get(k) for k in PLAIN_SAMPLE_KEYS} for s in samples_of(run, "plain_capitals")] == want
        assert results_of(run)["results"]["plain_capitals"] == results_of(off)["results"]["plain_capitals"]
    assert "fully_french,none" in results_of(mixed)["results"]["drift_french_single"]  # the drift task ran too
    return want


def gguf_with_eos(source, target, eos_id: int) -> str:
    """A copy of the GGUF file ``source`` whose metadata names ``eos_id`` as its end-of-text
    token (the chat template still ends turns on its own token): a model that ends its turn
    on a token other than its EOS, written with the ``gguf`` package."""
    import gguf

    shutil.copyfile(source, target)
    reader = gguf.GGUFReader(str(target), "r+")
    field = reader.get_field("tokenizer.ggml.eos_token_id")
    field.parts[field.data[0]][0] = eos_id
    reader.data.flush()
    del reader
    return str(target)


def model_with_eos(model_dir, target, eos_token: str) -> str:
    """A copy of a model folder (weights linked) whose tokenizer, config and generation
    config name ``eos_token`` as the end of text, while its chat template still ends turns
    on its own token."""
    from transformers import AutoTokenizer

    os.makedirs(target, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(model_dir)
    eos_id = tok.convert_tokens_to_ids(eos_token)
    tok.eos_token = eos_token
    tok.save_pretrained(target)  # written first: nothing below is written through a link
    for name in ("config.json", "generation_config.json"):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                cfg = json.load(fh)
            cfg["eos_token_id"] = eos_id
            with open(os.path.join(target, name), "w", encoding="utf-8") as fh:
                json.dump(cfg, fh)
    for name in os.listdir(model_dir):  # the weights
        if not os.path.lexists(os.path.join(target, name)):
            os.symlink(os.path.join(model_dir, name), os.path.join(target, name))
    return str(target)


def not_json(constant):
    """``json.loads``'s ``parse_constant``: NaN and the infinities are not JSON (strict parsers
    reject them), so a test that reads one fails."""
    raise AssertionError(f"{constant} is not JSON")
