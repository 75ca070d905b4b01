"""Base for the project's Python task classes, built by lm-eval from their YAML."""
from __future__ import annotations

import json

from lm_eval.api.task import ConfigurableTask

from .. import __version__
from ..errors import DriftUsageError
from ..settings import int_option


def check_generation_kwargs(gen: dict, where: str = "--gen_kwargs") -> dict:
    """The generation options every backend relies on, checked before any request runs:
    ``max_gen_toks`` >= 1, ``min_new_tokens`` >= 0, ``temperature`` >= 0, ``until`` text."""
    if not isinstance(gen, dict):
        raise DriftUsageError(f"{where} must be key=value options, got {gen!r}")
    if "max_gen_toks" in gen:
        gen["max_gen_toks"] = int_option(f"{where} max_gen_toks", gen["max_gen_toks"], 1)
    if "min_new_tokens" in gen:
        gen["min_new_tokens"] = int_option(f"{where} min_new_tokens", gen["min_new_tokens"], 0)
    t = gen.get("temperature", 0.0)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0:
        raise DriftUsageError(f"{where} temperature must be a number >= 0, got {t!r}")
    until = gen.get("until", [])
    if not (isinstance(until, str) or (isinstance(until, list) and all(isinstance(u, str) for u in until))):
        raise DriftUsageError(f"{where} until must be text or a list of texts, got {until!r}")
    return gen


class YamlTask(ConfigurableTask):
    """A ``ConfigurableTask`` named by ``class: !function ...`` in a task YAML: lm-eval hands
    the whole config, ``class`` entry included, which ``TaskConfig`` does not accept. The
    package version joins the task's metadata (so results files say which version scored
    them), and generation options and, with ``--apply_chat_template``, the model's chat
template are checked before the first request is built."""

    def __init__(self, config=None):
        config = dict(config or {})
        config.pop("class", None)
        config["metadata"] = {**(config.get("metadata") or {}), "lm_eval_drift_version": __version__}
        super().__init__(config=config)

    def build_all_requests(self, *args, **kwargs):
        if self.config.generation_kwargs is not None:
            check_generation_kwargs(self.config.generation_kwargs, f"{self.config.task} generation kwargs")
        template = kwargs.get("chat_template")
        if kwargs.get("apply_chat_template") and callable(template):
            try:
                template([{"role": "user", "content": "?"}])
            except (ValueError, TypeError) as exc:  # transformers: "tokenizer.chat_template is not set"
                raise DriftUsageError(f"{self.config.task}: --apply_chat_template needs a model with a chat template "
                                      f"({str(exc).split('!')[0].split('. ')[0]}): drop it for base models, or use a "
                                      f"chat model") from None
        return super().build_all_requests(*args, **kwargs)

    def request(self, doc, request_type: str, argument, gen_kwargs=None, **kwargs):
        """One request of ``request_type`` for ``doc``: ``arguments`` are ``argument`` (a
        JSON-able value is sent as JSON text) and the generation kwargs."""
        from lm_eval.api.instance import Instance

        if not isinstance(argument, str):
            argument = json.dumps(argument, ensure_ascii=False)
        return Instance(request_type=request_type, doc=doc, arguments=(argument, gen_kwargs or {}), idx=0,
                        metadata=kwargs.get("metadata", (None, None, None)))
