"""The lm-eval task folders of lm-eval-drift (``drift_eval.tasks``).

Each folder holds the task YAML files, a ``utils.py`` that lm-eval loads from the YAML, and
a README. The tasks' data and its loaders live below, in ``drift_eval.taskdata``.
"""
import copy
import functools
import glob
import os

from drift_eval.catalogue import build


def task_folder() -> str:
    """The folder to give lm-eval as ``include_path`` (``--include_path``)."""
    return os.path.dirname(os.path.abspath(__file__))


def _task_documents():
    """(family, path, document) of every task YAML (``include:`` followed), in file order;
    the family is the task's folder. The files are parsed once per process (the package's
    own files); each call gets its own copies."""
    for family, path, doc in _parsed_documents():
        yield family, path, copy.deepcopy(doc)


@functools.lru_cache(maxsize=1)
def _parsed_documents() -> tuple:
    import yaml  # deferred, start-up: loads yaml

    class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's where PyYAML has it
        pass

    _Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # !function ...
    parsed: dict = {}

    def load(path, depth=0):
        if path not in parsed:  # a template several tasks include is parsed once
            with open(path, encoding="utf-8") as fh:
                parsed[path] = yaml.load(fh, Loader=_Loader) or {}  # noqa: S506 (a SafeLoader subclass)
        doc = copy.deepcopy(parsed[path])
        inc = doc.pop("include", None)
        if inc and depth < 4:
            base = load(os.path.join(os.path.dirname(path), inc), depth + 1)
            base.update(doc)
            doc = base
        return doc

    return tuple((os.path.basename(os.path.dirname(path)), path, load(path))
                 for path in sorted(glob.glob(os.path.join(task_folder(), "*", "*.yaml"))))


def metric_catalogue() -> dict:
    """Today's catalogue (``drift_eval.catalogue.build``): ``{task: {metric: info}}`` from
    every task YAML's ``metric_list`` (``include:`` followed) and every group's
    ``aggregate_metric_list``, in file order. The read side uses a run's own recorded
    definitions (``drift_eval.catalogue.recorded``) and this only for results that lack
    them. Reads YAML only; imports neither lm-eval nor torch."""
    return build((os.path.relpath(path, task_folder()), doc) for _, path, doc in _task_documents())


def task_info() -> dict:
    """``{task: {"family": folder, "dataset_kwargs": {...}}}`` for every task and group, in
    file order: the folder a task comes from (its family) and its YAML's dataset options
    (e.g. the variant ``axis``)."""
    out = {}
    for family, _, doc in _task_documents():
        name = doc.get("group") or doc.get("task")
        if isinstance(name, str):
            kwargs = doc.get("dataset_kwargs")
            out[name] = {"family": family, "dataset_kwargs": kwargs if isinstance(kwargs, dict) else {}}
    return out
