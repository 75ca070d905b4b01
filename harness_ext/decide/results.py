"""Read an output folder of lm-eval results, one or more compensation settings.

The one loader behind ``drift-eval report``, ``drift-eval gate`` and the pytest plugin.

Layout (what ``drift-eval sweep`` and ``drift-eval demo --output`` write, and what
``lm_eval --output_path OUT/<setting> --log_samples`` writes)::

    OUT/sweep.json                                  (sweeps only: the planned settings)
    OUT/<setting>/<model>/results_<date>.json       lm-eval's standard results
    OUT/<setting>/<model>/samples_<task>_<date>.jsonl

Every ``results_*.json`` under ``OUT`` (up to three folders deep) is read; its setting is
the compensation in its ``config.model_args`` (``none`` for a model without one), so folder
names do not matter. Several files of one setting are merged task by task, the newest file
winning. Per-sample values come from the samples files of the same run (same date).
Problems stop with one ``DriftUsageError`` line saying what to do.
"""
from __future__ import annotations

import glob
import math
import os
import re
from dataclasses import dataclass, field

from ..errors import DriftUsageError
from ..files import read_json, read_jsonl
from ..settings import folder_name, setting_label  # noqa: F401  (folder_name: the sweep's layout)

MANIFEST = "sweep.json"
_RESULTS_RE = re.compile(r"^results_(?P<date>.+)\.json$")


@dataclass(repr=False)
class Metric:
    """One metric of one task under one setting."""
    task: str
    name: str
    setting: str
    value: object
    stderr: float | None
    n: int | None
    lower: float
    upper: float
    per_sample: dict | None = None     # doc_id -> value, when samples were logged
    higher_is_better: bool | None = None

    def spread(self) -> str:
        """``, 95% CI [lo, hi], n=N`` (the parts that are known)."""
        ci = "" if math.isnan(self.lower) else f", 95% CI [{self.lower:.4f}, {self.upper:.4f}]"
        return ci + ("" if self.n is None else f", n={self.n}")

    def describe(self) -> str:
        se = f" ± {self.stderr:.4f} (stderr)" if isinstance(self.stderr, float) else ""
        val = f"{self.value:.4f}" if isinstance(self.value, float) else repr(self.value)
        return f"{self.task}/{self.name} under {self.setting}: {val}{se}{self.spread()}"

    __repr__ = describe


@dataclass
class TaskResult:
    name: str
    values: dict                       # metric -> value (float, or a list for profiles)
    stderrs: dict                      # metric -> float or None
    n: int | None
    higher_is_better: dict
    samples: list | None = None        # logged samples (dicts), when present
    is_group: bool = False
    subtasks: list = field(default_factory=list)  # a group's tasks (lm-eval's group_subtasks)


@dataclass
class Setting:
    label: str
    model_args: dict
    files: list = field(default_factory=list)
    tasks: dict = field(default_factory=dict)   # task or group name -> TaskResult

    def task(self, name: str) -> TaskResult:
        if name not in self.tasks:
            raise DriftUsageError(f"setting {self.label} has no results for '{name}'; it has: "
                                  f"{', '.join(sorted(self.tasks)) or 'nothing'}")
        return self.tasks[name]


def _float(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _task_results(res: dict, path: str, folder: str, date: str) -> dict:
    out = {}
    groups = set(res.get("groups", {}) or {})
    hib_all = res.get("higher_is_better", {}) or {}
    for section in ("results", "groups"):
        for name, entries in (res.get(section) or {}).items():
            if not isinstance(entries, dict):
                raise DriftUsageError(f"{path}: results['{name}'] is not an object; the file is not lm-eval output")
            values, stderrs = {}, {}
            for key, v in entries.items():
                metric, sep, filt = key.partition(",")
                if not sep or filt != "none":
                    continue
                if metric.endswith("_stderr"):
                    stderrs[metric[: -len("_stderr")]] = _float(v)
                else:
                    values[metric] = v
            for metric in values:  # fitted metrics (drift_alpha) report their bootstrap error as <metric>_se
                if stderrs.get(metric) is None and _float(values.get(f"{metric}_se")) is not None:
                    stderrs[metric] = _float(values[f"{metric}_se"])
            n = (res.get("n-samples", {}).get(name) or {}).get("effective")
            tr = TaskResult(name, values, stderrs, n, dict(hib_all.get(name, {}) or {}),
                            is_group=section == "groups" or name in groups,
                            subtasks=list((res.get("group_subtasks") or {}).get(name) or []))
            if section == "groups" and name in out:  # lm-eval lists groups in both sections
                out[name].is_group = True
                continue
            if not tr.is_group:
                files = glob.glob(os.path.join(glob.escape(folder), f"samples_{glob.escape(name)}_{glob.escape(date)}.jsonl"))
                if files:
                    tr.samples = read_jsonl(files[0], "samples file")
            out[name] = tr
    return out


def _results_files(root: str) -> list:
    found = []
    for depth in ("", "*", os.path.join("*", "*"), os.path.join("*", "*", "*")):
        found += glob.glob(os.path.join(glob.escape(root), depth, "results_*.json"))
    return sorted(set(found))


class Output:
    """All settings found in an output folder."""

    def __init__(self, root: str, settings: dict, manifest: dict | None):
        self.root = root
        self.settings = settings
        self.manifest = manifest

    # ------------------------------------------------------------------ access
    @property
    def labels(self) -> list:
        """Setting labels, ``none`` first, then in sweep order (or sorted)."""
        order = (self.manifest or {}).get("settings", [])
        rank = {lab: i for i, lab in enumerate(order)}
        return sorted(self.settings, key=lambda s: (s != "none", rank.get(s, len(rank)), s))

    def setting(self, label: str) -> Setting:
        if label not in self.settings:
            raise DriftUsageError(f"no results for setting '{label}' in {self.root}; settings found: "
                                  f"{', '.join(self.labels)}")
        return self.settings[label]

    def metric(self, task: str, name: str, setting: str = "none") -> Metric:
        from ..metrics import stats

        tr = self.setting(setting).task(task)
        if name not in tr.values:
            raise DriftUsageError(f"{task} under {setting} has no metric '{name}'; it has: "
                                  f"{', '.join(sorted(tr.values))}")
        value = tr.values[name]
        per = self._per_sample(self.setting(setting), tr, name)
        stderr = tr.stderrs.get(name)
        lo = hi = math.nan
        if per:
            lo, hi = stats.mean_interval(list(per.values()))
        elif isinstance(_float(value), float) and isinstance(stderr, float):
            lo, hi = stats.normal_interval(float(value), stderr)
        n = tr.n if tr.n is not None else (len(per) if per else None)
        hib = tr.higher_is_better.get(name)
        return Metric(task, name, setting, float(value) if _float(value) is not None else value, stderr, n,
                      lo, hi, per, hib)

    def _per_sample(self, st: Setting, tr: TaskResult, name: str):
        """doc_id -> value from the logged samples; for a group whose aggregate pools its
        tasks' samples (lm-eval's weighted mean), (task, doc_id) -> value over all of them."""
        if tr.samples:
            return {s["doc_id"]: float(s[name]) for s in tr.samples
                    if "doc_id" in s and isinstance(_float(s.get(name)), float)} or None
        if tr.is_group and tr.subtasks:
            pooled = {}
            for sub in tr.subtasks:
                str_ = st.tasks.get(sub)
                vals = self._per_sample(st, str_, name) if str_ is not None and name in str_.values else None
                if not vals:
                    return None
                pooled.update({(sub, k): v for k, v in vals.items()})
            return pooled
        return None

    def compare(self, task: str, name: str, setting: str, baseline: str = "none"):
        """Paired difference ``setting − baseline`` on the samples both logged; for fitted
        metrics without per-sample values (drift_alpha's α), a z test on their standard
        errors; None when neither is possible."""
        from ..metrics import stats

        a, b = self.metric(task, name, setting), self.metric(task, name, baseline)
        if not a.per_sample or not b.per_sample:
            if all(isinstance(v, float) and math.isfinite(v) for v in (a.value, a.stderr, b.value, b.stderr)):
                return stats.difference_from_errors(a.value, a.stderr, b.value, b.stderr, a.n or 0)
            return None
        docs = sorted(set(a.per_sample) & set(b.per_sample))
        if not docs:
            return None
        return stats.paired_difference([a.per_sample[d] for d in docs], [b.per_sample[d] for d in docs])

    def scalar_metrics(self, setting: str, task: str) -> list:
        """Names of the float-valued metrics of a task, in file order."""
        tr = self.setting(setting).task(task)
        return [m for m, v in tr.values.items() if _float(v) is not None]

    def task_names(self) -> list:
        names = []
        for lab in self.labels:
            for t in self.settings[lab].tasks:
                if t not in names:
                    names.append(t)
        return names


def load_output(root, allow_partial: bool = False) -> Output:
    """Load every setting under ``root``; a sweep whose planned settings are not all there
    is an error unless ``allow_partial``."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise DriftUsageError(f"results folder not found: {root}")
    manifest = None
    mpath = os.path.join(root, MANIFEST)
    if os.path.isfile(mpath):
        manifest = read_json(mpath, "sweep manifest")
        if not isinstance(manifest, dict) or not isinstance(manifest.get("settings"), list):
            raise DriftUsageError(f"{mpath} is not a sweep manifest (no 'settings' list): delete it or rerun the sweep")
    files = _results_files(root)
    if not files:
        raise DriftUsageError(f"no lm-eval results in {root}: expected <setting>/<model>/results_*.json, written by "
                              f"'drift-eval sweep --output {root}' or 'lm_eval --output_path {root}/<setting> --log_samples'")
    settings: dict = {}
    dated = []
    for path in files:
        res = read_json(path, "results file")
        if not isinstance(res, dict) or not isinstance(res.get("results"), dict) or not isinstance(res.get("config"), dict):
            raise DriftUsageError(f"{path} is not an lm-eval results file (no 'results' or 'config' object)")
        date = _RESULTS_RE.match(os.path.basename(path)).group("date")
        dated.append((date, path, res))
    for date, path, res in sorted(dated):  # oldest first: newer files overwrite tasks
        model_args = res["config"].get("model_args") or {}
        label = setting_label(model_args)
        st = settings.setdefault(label, Setting(label, model_args if isinstance(model_args, dict) else {}))
        st.files.append(path)
        st.tasks.update(_task_results(res, path, os.path.dirname(path), date))
    if manifest is not None:
        missing = [s for s in manifest["settings"] if s not in settings]
        expected_tasks = manifest.get("tasks") or []
        incomplete = [f"{s} ({', '.join(t for t in expected_tasks if t not in settings[s].tasks)})"
                      for s in manifest["settings"] if s in settings
                      and any(t not in settings[s].tasks for t in expected_tasks)]
        if (missing or incomplete) and not allow_partial:
            what = "; ".join(filter(None, [
                f"no results for {', '.join(missing)}" if missing else "",
                f"tasks missing for {', '.join(incomplete)}" if incomplete else ""]))
            raise DriftUsageError(f"{root} holds a partial sweep ({what}): finish it with "
                                  f"'drift-eval sweep --output {root}' (same options) before using the results")
    return Output(root, settings, manifest)
