"""Registers the drift tasks and the ``hf-drift`` model with lm-eval, lazily.

Python loads this file at start-up through ``lm_eval_drift.pth``, by its installed location
(never by name: a ``drift_eval`` placed earlier on ``sys.path`` is not run by every program
on the machine; see ``setup.py``). It must stay cheap:
it imports nothing heavy and only puts a finder on ``sys.meta_path`` that waits for
``lm_eval.tasks.manager``, ``lm_eval.models`` and ``lm_eval.evaluator``. When one of them
is imported, the finder wraps its loader so that, right after the module has run, the drift
task folder joins every ``TaskManager``'s search path, ``hf-drift`` joins the model
registry, and an ``evaluate`` with drift tasks gets the model wrapped for them
(``drift_eval.plugin.registration``). Nothing happens in processes that never import
lm-eval.

``LM_EVAL_DRIFT_AUTOLOAD=0`` switches the hook off (then use ``--include_path``); where the
installed lm-eval reads the entry-point groups itself, the hook leaves that part to it
(see ``drift_eval.plugin.registration``).
"""
import os
import sys

_TARGETS = ("lm_eval.tasks.manager", "lm_eval.models", "lm_eval.evaluator")


def _after_tasks_manager(module):
    # deferred, start-up: keeps lm-eval's start-up line light
    from drift_eval.plugin.registration import index_entry_point_folders

    index_entry_point_folders(module)


def _after_models(module):
    # deferred, start-up: keeps lm-eval's start-up line light
    from drift_eval.plugin.registration import register_models

    register_models(module)


def _after_evaluator(module):
    from drift_eval.plugin.registration import wrap_evaluate  # deferred, start-up: keeps lm-eval's start-up line light

    wrap_evaluate(module)


_AFTER = {"lm_eval.tasks.manager": _after_tasks_manager, "lm_eval.models": _after_models,
          "lm_eval.evaluator": _after_evaluator}


class _Loader:
    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            _AFTER[self._name](module)
        except Exception as exc:  # never break lm-eval itself
            sys.stderr.write(f"lm-eval-drift: could not register with lm-eval: {exc}\n")

    def __getattr__(self, item):
        return getattr(self._loader, item)


class _Finder:
    drift_startup_hook = True  # how a copy of this module (loaded twice) recognises the finder

    def find_spec(self, name, path=None, target=None):
        if name not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if getattr(finder, "drift_startup_hook", False) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None


def install():
    if os.environ.get("LM_EVAL_DRIFT_AUTOLOAD", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    if not any(getattr(f, "drift_startup_hook", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    # lm-eval may already be imported (the hook was installed late): register now.
    for name in _TARGETS:
        mod = sys.modules.get(name)
        if mod is not None:
            _AFTER[name](mod)


install()
