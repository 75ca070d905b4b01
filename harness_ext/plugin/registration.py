"""Plugin discovery for lm-eval 0.4.13, which has none of its own, and the drift runs' model.

``drift_eval._startup`` calls each function here right after lm-eval has imported the
module concerned:

* ``lm_eval.tasks.manager``: every installed ``lm_eval.tasks`` entry point (the value
  names an importable package whose folder holds task YAML files: the group proposed
  upstream in lm-eval PR #4015) joins the ``include_path`` of every ``TaskManager``
  (``index_entry_point_folders``);
* ``lm_eval.models``: every ``lm_eval.models`` entry point (``name = "module:Class"``) joins
  lm-eval's model registry through its public ``register``, lazily (imported only when a
  run asks for that model name) (``register_models``);
* ``lm_eval.evaluator``: an ``evaluate`` whose tasks include drift tasks gets the user's
  model wrapped for them (``wrap_evaluate``, ``drift_eval.plugin.wrapper``); any other run
  is handed on as it came.

No lm-eval class is changed: two module-level names are replaced (``TaskManager`` by a
subclass, ``evaluate`` by a function that calls it). The explicit route needs none of
this: ``lm_eval --include_path <folder>``.

Why a hook at all, and when it goes: docs/architecture.md ("Registration"). Where the
installed lm-eval reads a group itself (models: upstream PR #4013; tasks: PR #4015), the
hook steps aside for that group, so nothing is indexed twice.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
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


_warned: set = set()


def _warn(message: str) -> None:
    """One line on stderr, once per process (every ``TaskManager`` asks again)."""
    # deferred, start-up: lm-eval imports this module at every start
    from drift_eval import inert

    if message not in _warned:
        _warned.add(message)
        sys.stderr.write(f"lm-eval-drift: {inert.terminal(message)}\n")


def _package(ep) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or "an unknown package"


def task_folders() -> list[str]:
    """Folders named by every installed ``lm_eval.tasks`` entry point; one that names no
    importable package folder is skipped with a warning (it must not break lm-eval)."""
    folders = []
    for ep in entry_points(group="lm_eval.tasks"):
        try:
            spec = importlib.util.find_spec(ep.value)
            locations = list(spec.submodule_search_locations or []) if spec is not None else []
        except Exception as exc:  # a broken package: its parent fails to import, a bad name...
            _warn(f"skipped the lm_eval.tasks entry point '{ep.name} = {ep.value}' of {_package(ep)} ({exc})")
            continue
        if not locations:
            _warn(f"skipped the lm_eval.tasks entry point '{ep.name} = {ep.value}' of {_package(ep)}: "
                  f"not an importable package folder")
            continue
        folders.extend(os.path.abspath(p) for p in locations)
    return sorted(set(folders))


_HOLDERS = ("lm_eval.tasks.manager", "lm_eval.tasks", "lm_eval.evaluator")


def index_entry_point_folders(manager_module) -> None:
    """Make every ``TaskManager`` created from now on also index the entry-point task
    folders: the modules that hold lm-eval's ``TaskManager`` (``manager_module`` and, when
    the hook came late, those that imported it already) get a subclass of it under the same
    name, whose ``__init__`` adds the folders to ``include_path``. lm-eval's class is not
    changed."""
    base = manager_module.TaskManager
    if getattr(base, "_drift_entry_points", False) or upstream_reads("lm_eval.tasks", manager_module):
        return
    signature = inspect.signature(base.__init__)

    class TaskManager(base):
        __doc__ = base.__doc__
        _drift_entry_points = True

        def __init__(self, *args, **kwargs):
            bound = signature.bind_partial(self, *args, **kwargs)
            include_path = bound.arguments.get("include_path")
            paths = [] if include_path is None else (
                list(include_path) if isinstance(include_path, (list, tuple)) else [include_path])
            known = {os.path.abspath(str(p)) for p in paths}
            paths += [f for f in task_folders() if f not in known]
            bound.arguments["include_path"] = paths or None
            base.__init__(*bound.args, **bound.kwargs)

    TaskManager.__qualname__ = base.__qualname__
    for name in _HOLDERS:
        holder = sys.modules.get(name)
        if holder is not None and getattr(holder, "TaskManager", None) is base:
            holder.TaskManager = TaskManager


OURS = "lm-eval-drift"


def _resolvable(ep) -> bool:
    """Whether ``module:attribute`` names a module that exists (found, not imported)."""
    module, _, attr = ep.value.partition(":")
    try:
        return bool(attr) and importlib.util.find_spec(module.strip()) is not None
    except Exception:
        return False


def register_models(models_module=None) -> None:
    """Add every ``lm_eval.models`` entry point to lm-eval's registry as a lazy placeholder
    (``models_module``: ``lm_eval.models``, which may still be importing). An entry point
    whose module cannot be found is skipped with a warning; a name that several packages
    claim, or that lm-eval already knows, is reported, and this package's own entry wins
    only for its own names."""
    # deferred, start-up: lm-eval imports this module at every start
    import lm_eval.api.registry as registry

    if upstream_reads("lm_eval.models", registry, models_module):
        return
    model_registry = registry.model_registry
    claims: dict = {}
    for ep in entry_points(group="lm_eval.models"):
        if not _resolvable(ep):
            _warn(f"skipped the lm_eval.models entry point '{ep.name} = {ep.value}' of {_package(ep)}: its module "
                  f"cannot be found")
            continue
        claims.setdefault(ep.name, []).append(ep)
    for name, eps in claims.items():
        ours = [ep for ep in eps if _package(ep) == OURS]
        chosen = (ours or eps)[0]
        if len(eps) > 1:
            _warn(f"model '{name}' is claimed by {', '.join(sorted(_package(ep) for ep in eps))}; using "
                  f"{chosen.value} of {_package(chosen)} (uninstall the other package to silence this)")
        if name in model_registry:
            if chosen.value.split(":")[0].strip() != _registered_module(model_registry, name):
                _warn(f"model '{name}' is already registered with lm-eval by other code; {_package(chosen)}'s "
                      f"{chosen.value} is not used")
            continue
        model_registry.register(name, target=chosen.value)


def _registered_module(model_registry, name) -> str | None:
    """The module behind a registered model name (a placeholder's target, or a class's),
    without importing it (lm-eval's registry has no public way to peek)."""
    entry = getattr(model_registry, "_objs", {}).get(name)
    value = entry if isinstance(entry, str) else getattr(entry, "value", None)
    if isinstance(value, str):
        return value.split(":")[0]
    return getattr(entry, "__module__", None)


def wrap_evaluate(evaluator_module) -> None:
    """lm-eval's ``evaluate`` gets, for a run with drift tasks, the model wrapped for them
    (``drift_eval.plugin.run_check.for_run``: the run is checked first, before any request
    is built); a run without drift tasks is handed on exactly as it came."""
    original = evaluator_module.evaluate
    if getattr(original, "_drift_wrapped", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def evaluate(*args, **kwargs):
        # deferred, start-up: this module runs at lm-eval's start, the wrapper only for a run
        from drift_eval.logs import log
        from drift_eval.plugin.progress import RUN
        from drift_eval.plugin.run_check import for_run, tasks_of

        given = signature.bind_partial(*args, **kwargs).arguments
        wrapped = for_run(given.get("lm"), tasks_of(given.get("task_dict")), given.get("apply_chat_template", False))
        if wrapped is None:
            return original(*args, **kwargs)
        if "lm" in kwargs:
            kwargs["lm"] = wrapped
        else:
            args = (wrapped, *args[1:])
        RUN.reset()
        results = original(*args, **kwargs)
        log.info(RUN.summary())  # how the run's time went: generation, and scoring on and off its critical path
        return results

    evaluate._drift_wrapped = True
    evaluator_module.evaluate = evaluate
