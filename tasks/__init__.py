"""The lm-eval task folders of lm-eval-drift (``drift_eval.tasks``).

Each folder holds the task YAML files, its data, a ``data.py`` loader for code outside the
task (the one way in), a ``utils.py`` that lm-eval loads from the YAML, and a README.
"""
import os


def task_folder() -> str:
    """The folder to give lm-eval as ``include_path`` (``--include_path``)."""
    return os.path.dirname(os.path.abspath(__file__))


def metric_catalogue() -> dict:
    """``{task: {metric: {"higher_is_better": bool | None, "report": str | None}}}`` from
    every task YAML's ``metric_list`` (``include:`` followed), in file order. ``report`` is
    the YAML's hint for reports: ``key`` (compared between runs and shown first) or
    ``summary`` (also in the summary table). Groups are listed with their
    ``aggregate_metric_list``. Reads YAML only; imports neither lm-eval nor torch."""
    import glob

    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # !function ...

    def load(path, depth=0):
        with open(path, encoding="utf-8") as fh:
            doc = yaml.load(fh, Loader=_Loader) or {}  # noqa: S506 (a SafeLoader subclass)
        inc = doc.pop("include", None)
        if inc and depth < 4:
            base = load(os.path.join(os.path.dirname(path), inc), depth + 1)
            base.update(doc)
            doc = base
        return doc

    out = {}
    for path in sorted(glob.glob(os.path.join(task_folder(), "*", "*.yaml"))):
        doc = load(path)
        name = doc.get("group") or doc.get("task")
        entries = doc.get("metric_list") or doc.get("aggregate_metric_list") or []
        if isinstance(name, str):
            out[name] = {e["metric"]: {"higher_is_better": e.get("higher_is_better"), "report": e.get("report")}
                         for e in entries if isinstance(e, dict) and isinstance(e.get("metric"), str)}
    return out
