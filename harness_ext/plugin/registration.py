"""Plugin discovery for lm-eval 0.4.13, which has none of its own.

Two entry-point groups are honoured, for this package and any other that declares them:

* ``lm_eval.tasks``: the value names an importable package whose folder holds task YAML
  files (the group proposed upstream in lm-eval PR #4015). Each such folder joins the
  ``include_path`` of every ``TaskManager``.
* ``lm_eval.models``: ``name = "module:Class"``; the class joins lm-eval's model registry
  lazily (imported only when a run asks for that model name).

The explicit route needs none of this: ``lm_eval --include_path <folder>``.

Why a hook at all, and when it goes: docs/architecture.md ("Registration"). Where the
installed lm-eval reads a group itself (models: upstream PR #4013; tasks: PR #4015), the
hook steps aside for that group, so nothing is indexed twice.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import os
from importlib.metadata import entry_points


def upstream_reads(group: str, *modules) -> bool:
    """Whether lm-eval's own code (``modules``) reads the entry-point ``group``."""
    for module in modules:
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            continue
        if f'"{group}"' in source or f"'{group}'" in source:
            return True
    return False


def task_folders() -> list[str]:
    """Folders named by every installed ``lm_eval.tasks`` entry point."""
    folders = []
    for ep in entry_points(group="lm_eval.tasks"):
        spec = importlib.util.find_spec(ep.value)
        if spec is None or not spec.submodule_search_locations:
            continue
        folders.extend(os.path.abspath(p) for p in spec.submodule_search_locations)
    return sorted(set(folders))


def patch_task_manager(manager_module) -> None:
    """Make every ``TaskManager`` also index the entry-point task folders."""
    cls = manager_module.TaskManager
    if getattr(cls.__init__, "_drift_patched", False) or upstream_reads("lm_eval.tasks", manager_module):
        return
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, include_path=None, **kwargs):
        paths = [] if include_path is None else (
            list(include_path) if isinstance(include_path, (list, tuple)) else [include_path]
        )
        known = {os.path.abspath(str(p)) for p in paths}
        paths += [f for f in task_folders() if f not in known]
        original(self, *args, include_path=paths or None, **kwargs)

    __init__._drift_patched = True
    cls.__init__ = __init__


def register_models(models_module=None) -> None:
    """Add every ``lm_eval.models`` entry point to lm-eval's registry as a lazy placeholder
    (``models_module``: ``lm_eval.models``, which may still be importing)."""
    import lm_eval.api.registry as registry

    if upstream_reads("lm_eval.models", registry, models_module):
        return
    model_registry = registry.model_registry
    for ep in entry_points(group="lm_eval.models"):
        if ep.name not in model_registry:
            model_registry.register(ep.name, target=ep.value)


def _needs_hf_drift(what):
    def method(self, requests, *args, **kwargs):
        from ..errors import DriftUsageError
        from .backends import needs_hf_drift

        raise DriftUsageError(needs_hf_drift({r.task_name for r in requests if getattr(r, "task_name", None)}, what))

    method._drift_fallback = True
    return method


def _serve_conversations(self, requests, disable_tqdm: bool = False):
    from .backends import serve_conversations

    return serve_conversations(self, requests, disable_tqdm=disable_tqdm)


def add_request_fallbacks(model_module) -> None:
    """Give lm-eval's base ``LM`` the drift request types: conversations run on every model
    with a chat template; the others stop with one line naming ``hf-drift``."""
    from .request_types import CONVERSATION, NEEDS

    for request_type, what in NEEDS.items():
        if not hasattr(model_module.LM, request_type):
            method = _serve_conversations if request_type == CONVERSATION else _needs_hf_drift(what)
            setattr(model_module.LM, request_type, method)


def patch_evaluator(evaluator_module) -> None:
    """Check every run before lm-eval builds or generates anything, and adapt its model's
    class to the drift tasks (``drift_eval.plugin.backends.prepare_run``)."""
    original = evaluator_module.evaluate
    if getattr(original, "_drift_patched", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def evaluate(*args, **kwargs):
        from .backends import prepare_run

        given = signature.bind_partial(*args, **kwargs).arguments
        prepare_run(given.get("lm"), given.get("task_dict"), given.get("apply_chat_template", False))
        return original(*args, **kwargs)

    evaluate._drift_patched = True
    evaluator_module.evaluate = evaluate
