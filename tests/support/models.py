"""Tiny models and model folders for tests: random-init models of several families, a
chat model that generates in milliseconds, copies of a model with another chat template or
end-of-text token, and a byte-level tokenizer with one α scene."""
import json
import os
import shutil

import gguf
import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer


FAMILIES = ("llama", "qwen2", "gemma3_text", "gpt_neox")


def tiny_model(family: str, seed: int = 0, attn: str = "sdpa", layers: int = 2):
    """A random-init model of ``family``: 4 query heads over 2 key/value heads where the
    family has them; gemma3 alternates a sliding-window (8) and a full-attention layer."""
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
    if isinstance(dtype, torch.dtype):
        return float(torch.finfo(dtype).eps * n * scale)
    return float(np.finfo(dtype).eps * n * scale)


def forward_sums(model, keys: int, logits: bool = True) -> int:
    """``n`` for ``rounding`` after one forward of a decoder over ``keys`` keys: per layer
    the attention's sum over the keys, the hidden size three times (query/key/value, output
    and MLP input projections) and the MLP's intermediate size; then, for the logits, the
    output head's sum over the hidden size."""
    c = model.config
    n = c.num_hidden_layers * (keys + 3 * c.hidden_size + c.intermediate_size)
    return n + c.hidden_size if logits else n


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


def gguf_with_eos(source, target, eos_id: int) -> str:
    """A copy of the GGUF file ``source`` whose metadata names ``eos_id`` as its end-of-text
    token (the chat template still ends turns on its own token): a model that ends its turn
    on a token other than its EOS, written with the ``gguf`` package."""
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
