"""The lm-eval task folders of lm-eval-drift (``drift_eval.tasks``).

Each folder holds the task YAML files, its data, a ``data.py`` loader for code outside the
task (the one way in), a ``utils.py`` that lm-eval loads from the YAML, and a README.
"""
import os
import re


def task_folder() -> str:
    """The folder to give lm-eval as ``include_path`` (``--include_path``)."""
    return os.path.dirname(os.path.abspath(__file__))


def metric_catalogue() -> dict:
    """``{task: {metric: {"higher_is_better": bool | None, "report": str | None}}}`` from
    every task YAML's ``metric_list`` (``include:`` followed), in file order. ``report`` is
    the YAML's hint for reports: ``key`` (compared between runs), ``summary`` (also in the
    summary table and the leaderboard), ``curve`` (drawn, not tabled), ``timeline`` (a
    per-sample list of segment languages: survival curves and audit strips) or
    ``confidence`` (the per-sample list of those languages' probabilities). Groups are
    listed with their ``aggregate_metric_list``. Reads YAML only; imports neither lm-eval
    nor torch."""
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


#: per-layer fits (``alpha_l07``...) and per-turn rates (``french_turn_3``): metric families
#: that reports draw as curves, whatever their YAML hint
LAYER_METRIC = re.compile(r"^(alpha|beta)_l(\d{2,3})$")
FRENCH_TURN = re.compile(r"^french_turn_(\d+)$")


def hinted(catalogue: dict, task: str, *hints) -> list:
    """Metrics of ``task`` whose ``report`` hint is one of ``hints``, in YAML order."""
    return [m for m, info in catalogue.get(task, {}).items() if info["report"] in hints]


def is_curve(catalogue: dict, task: str, metric: str) -> bool:
    """Per-turn and per-layer metrics: drawn as curves, not listed in tables."""
    return (catalogue.get(task, {}).get(metric) or {}).get("report") == "curve" or bool(LAYER_METRIC.match(metric))
