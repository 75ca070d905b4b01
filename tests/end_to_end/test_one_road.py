"""One road from a request to the model: the drift tasks (single-turn and conversations)
run through lm-eval's ``simple_evaluate`` on ``hf-drift``, on lm-eval's ``hf`` (both
carrying each conversation's cache between turns) and on a real chat server. At every
generation call of the run, and after it, the model object has exactly the attributes it
had before, each the same object; its class and lm-eval's are unchanged; and one drift
wrapper is on the call stack, the same through the whole run: each conversation is wrapped
once."""
import json
import sys
import threading

import lm_eval
import pytest
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM

from drift_eval.plugin.model import HFDriftLM
from drift_eval.plugin.wrapper import DriftLM
from support.models import tiny_chat_model

pytestmark = pytest.mark.slow

TASKS = ["drift_french_single", "drift_french_multiturn"]
#: where each backend's generation reaches the model (lm-eval's ``HFLM`` and ``TemplateAPI``)
GENERATION = {"_model_generate", "model_call", "amodel_call"}


class RunWatch:
    """Inside the block, at every call of a function named in ``GENERATION`` (through
    ``sys.setprofile``, in every thread): what the model object holds, and the drift
    wrappers on the call stack and whether a conversation's turn is among its frames."""

    def __init__(self, model):
        self.model = model
        self.before = dict(vars(model))
        self.classes = {cls: dict(vars(cls)) for cls in type(model).__mro__ if cls.__module__ != "builtins"}
        self.calls = []  # (the model's attributes, the drift wrappers' ids, inside a conversation turn)

    def _profile(self, frame, event, arg):
        if event != "call" or frame.f_code.co_name not in GENERATION:
            return

        wrappers, turn, f = set(), False, frame
        while f is not None:
            wrappers |= {id(v) for v in list(f.f_locals.values()) if isinstance(v, DriftLM)}
            turn = turn or f.f_code.co_name == "_turns"
            f = f.f_back
        self.calls.append((dict(vars(self.model)), wrappers, turn))

    def __enter__(self):
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        threading.setprofile(None)

    def changed(self, attributes: dict) -> list[str]:
        """The attributes gained, lost or holding another object than before the run."""
        names = set(attributes) | set(self.before)
        return sorted(n for n in names if n not in attributes or n not in self.before
                      or attributes[n] is not self.before[n])


def _run(model, metadata=None):
    with RunWatch(model) as watch:
        out = lm_eval.simple_evaluate(model=model, tasks=TASKS, limit=1, gen_kwargs={"max_gen_toks": 4},
                                      apply_chat_template=True, log_samples=True, metadata=metadata)
    assert "fully_french,none" in out["results"]["drift_french_single"]
    [conversation] = out["samples"]["drift_french_multiturn"]
    return watch, conversation


def _check(watch, conversation, model):
    assert watch.calls, "no generation call was seen"
    for attributes, _, _ in watch.calls:
        assert watch.changed(attributes) == [], watch.changed(attributes)
    assert watch.changed(dict(vars(model))) == []
    assert {cls: dict(vars(cls)) for cls in watch.classes} == watch.classes
    assert all(len(wrappers) == 1 for _, wrappers, _ in watch.calls), [w for _, w, _ in watch.calls]
    assert len(set().union(*(w for _, w, _ in watch.calls))) == 1  # one wrapper for the whole run
    generated = sum(m["role"] == "assistant" for m in json.loads(conversation["resps"][0][0]))
    assert sum(turn for _, _, turn in watch.calls) >= generated > 0  # the turns were seen


def test_hf_drift(smollm2_dir, tmp_path):
    model = HFDriftLM(pretrained=tiny_chat_model(tmp_path / "tiny", smollm2_dir), compensation="log",
                      conversation_cache="on", device="cpu", batch_size=2)
    watch, conversation = _run(model)
    _check(watch, conversation, model)


def test_lm_evals_hf(smollm2_dir, tmp_path):
    model = HFLM(pretrained=tiny_chat_model(tmp_path / "tiny", smollm2_dir), device="cpu", batch_size=2)
    watch, conversation = _run(model, metadata={"conversation_cache": "on"})
    _check(watch, conversation, model)


def test_a_chat_server(llama_server):
    """lm-eval's ``local-chat-completions`` on llama-cpp-python's server. The model's own
    first call sets what lm-eval itself keeps on the object (made before the watch)."""
    from lm_eval.models.openai_completions import LocalChatCompletion  # deferred, start-up: loads aiohttp

    model = LocalChatCompletion(base_url=llama_server.url, model=llama_server.alias, num_concurrent=1, max_retries=1)
    hello = model.apply_chat_template([{"role": "user", "content": "Hello"}])
    model.generate_until([Instance("generate_until", {}, (hello, {"max_gen_toks": 2}), 0)])
    watch, conversation = _run(model)
    _check(watch, conversation, model)
