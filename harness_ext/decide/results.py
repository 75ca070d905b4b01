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

Every file is validated before anything is used: UTF-8, the JSON shape of lm-eval's
results, and in each samples file, per filter, one line per document with distinct
``doc_id``s, as many as the results file's ``n-samples.effective``, each metric of one
kind (number, list...) throughout. A run that logged samples for some tasks and not for
others was cut short. A damaged file stops with one ``DamagedFile`` line that names it;
other problems with one ``DriftUsageError`` line saying what to do.
"""
from __future__ import annotations

import glob
import math
import os
import re
from dataclasses import dataclass, field

from ..errors import DamagedFile, DriftUsageError
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


#: what to do about a damaged results or samples file
REMEDY = ("move it away and rerun the run that wrote it ('drift-eval sweep' does both: it reruns that setting "
          "and moves the damaged file aside)")


def _damaged(path: str, what: str) -> DamagedFile:
    """``what``: what is wrong, after the path (``is not ...``, or a ``: ...`` clause)."""
    sep = " " if what.startswith("is ") else ": "
    return DamagedFile(path, f"{path}{sep}{what}; {REMEDY}")


def _kind(v) -> str:
    if isinstance(v, (bool, int, float)):
        return "number"
    return {str: "text", list: "list", dict: "object", type(None): "null"}.get(type(v), type(v).__name__)


@dataclass
class RunFile:
    """One validated ``results_<date>.json`` with the samples files of the same run."""
    path: str
    date: str
    raw: dict
    model_args: dict
    setting: str
    tasks: dict                        # task or group name -> TaskResult
    sample_files: list = field(default_factory=list)


def _check_shape(res: dict, path: str) -> None:
    """The parts of lm-eval's results JSON that the loader relies on, with the right types."""
    if not isinstance(res.get("results"), dict) or not isinstance(res.get("config"), dict):
        raise _damaged(path, "is not an lm-eval results file (no 'results' or 'config' object)")
    for key in ("groups", "group_subtasks", "higher_is_better", "n-samples", "configs"):
        if key in res and not isinstance(res[key], dict):
            raise _damaged(path, f"'{key}' is a JSON {_kind(res[key])}, not an object")
    for section in ("results", "groups", "higher_is_better", "n-samples"):
        for name, entry in (res.get(section) or {}).items():
            if not isinstance(entry, dict):
                raise _damaged(path, f"{section}['{name}'] is a JSON {_kind(entry)}, not an object")
    for name, entry in (res.get("n-samples") or {}).items():
        for k in ("original", "effective"):
            v = entry.get(k)
            if k in entry and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise _damaged(path, f"n-samples['{name}']['{k}'] is {v!r}, not a count")
    for name, subs in (res.get("group_subtasks") or {}).items():
        if not isinstance(subs, list) or not all(isinstance(t, str) for t in subs):
            raise _damaged(path, f"group_subtasks['{name}'] is not a list of task names")
    model_args = res["config"].get("model_args")
    if model_args is not None and not isinstance(model_args, (dict, str)):
        raise _damaged(path, f"config.model_args is a JSON {_kind(model_args)}, not an object")


def _check_samples(samples: list, path: str, task: str, n_samples: dict, metrics: list) -> None:
    """Sample lines against the results file: per filter, one line per document, distinct
    document ids, as many as ``n-samples.effective``; each metric of one kind throughout."""
    by_filter: dict = {}
    kinds: dict = {}
    for i, s in enumerate(samples, 1):
        doc = s.get("doc_id")
        if isinstance(doc, bool) or not isinstance(doc, int) or doc < 0:
            raise _damaged(path, f"line {i} has doc_id {doc!r}, not a document number")
        filt = s.get("filter", "none")
        seen = by_filter.setdefault(filt if isinstance(filt, str) else repr(filt), set())
        if doc in seen:
            raise _damaged(path, f"line {i} repeats doc_id {doc}")
        seen.add(doc)
        for m in metrics:
            if m in s:
                kind = _kind(s[m])
                first = kinds.setdefault(m, (kind, i))
                if first[0] != kind:
                    raise _damaged(path, f"line {i} has '{m}' as {kind}, line {first[1]} as {first[0]}")
    info = n_samples.get(task) or {}
    effective, original = info.get("effective"), info.get("original")
    for filt, docs in by_filter.items():
        if effective is not None and len(docs) != effective:
            raise _damaged(path, f"{len(docs)} sample line(s){'' if filt == 'none' else f' for filter {filt}'}, "
                                 f"but the results file counts {effective} (n-samples.effective): the file was cut "
                                 f"short or belongs to another run")
        if original and max(docs) >= original:
            raise _damaged(path, f"doc_id {max(docs)} is beyond the task's {original} documents")
    if effective and not by_filter:
        raise _damaged(path, f"no sample lines, but the results file counts {effective}")


def _task_results(res: dict, path: str, date: str) -> tuple[dict, list]:
    out, sample_files = {}, []
    folder = os.path.dirname(path)
    groups = set(res.get("groups") or {})
    hib_all = res.get("higher_is_better") or {}
    n_samples = res.get("n-samples") or {}
    for section in ("results", "groups"):
        for name, entries in (res.get(section) or {}).items():
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
            n = (n_samples.get(name) or {}).get("effective")
            tr = TaskResult(name, values, stderrs, n, dict(hib_all.get(name) or {}),
                            is_group=section == "groups" or name in groups,
                            subtasks=list((res.get("group_subtasks") or {}).get(name) or []))
            if section == "groups" and name in out:  # lm-eval lists groups in both sections
                out[name].is_group = True
                continue
            out[name] = tr
    missing = []
    for name, tr in out.items():
        if tr.is_group:
            continue
        spath = os.path.join(folder, f"samples_{name}_{date}.jsonl")
        if not os.path.lexists(spath):
            missing.append(spath)
            continue
        samples = read_jsonl(spath, "samples file", remedy=REMEDY, line_ends=True)
        _check_samples(samples, spath, name, n_samples, list(tr.values))
        tr.samples = [s for s in samples if s.get("filter", "none") == "none"]
        sample_files.append(spath)
    if sample_files and missing:  # the run logged samples, but not all of them
        raise DamagedFile(missing[0], f"{missing[0]} is missing: the run of {path} logged samples for other tasks, "
                                      f"so it was cut short; {REMEDY}")
    return out, sample_files


def results_files(root: str) -> list:
    """Every ``results_*.json`` under ``root``, up to three folders deep (hidden folders,
    such as a sweep's unfinished ``.partial-*`` ones, are not looked in)."""
    found = []
    for depth in ("", "*", os.path.join("*", "*"), os.path.join("*", "*", "*")):
        found += glob.glob(os.path.join(glob.escape(root), depth, "results_*.json"))
    return sorted(set(found))


def read_run_file(path: str) -> RunFile:
    """One results file and its samples, validated; a damaged file is a ``DamagedFile``
    naming it."""
    match = _RESULTS_RE.match(os.path.basename(path))
    if not match:
        raise DriftUsageError(f"{path} is not named results_<date>.json")
    res = read_json(path, "results file", remedy=REMEDY, expect=dict)
    _check_shape(res, path)
    model_args = res["config"].get("model_args") or {}
    try:
        label = setting_label(model_args)
    except DriftUsageError as exc:
        raise _damaged(path, f"config.model_args: {exc.message}") from None
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    tasks, sample_files = _task_results(res, path, match.group("date"))
    return RunFile(path, match.group("date"), res, model_args, label, tasks, sample_files)


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
        if per and len(per) > 1:
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


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def read_manifest(root: str) -> dict | None:
    """``root/sweep.json`` (None when absent), validated."""
    path = os.path.join(root, MANIFEST)
    if not os.path.lexists(path):
        return None
    remedy = "delete it (finished settings are kept) and rerun the sweep"
    manifest = read_json(path, "sweep manifest", remedy=remedy, expect=dict)
    if not _str_list(manifest.get("settings")) or not _str_list(manifest.get("tasks", [])) \
            or not isinstance(manifest.get("options", {}), dict):
        raise DamagedFile(path, f"{path} is not a sweep manifest (a 'settings' and a 'tasks' list, an 'options' "
                                f"object): {remedy}")
    return manifest


def load_output(root, allow_partial: bool = False) -> Output:
    """Load every setting under ``root``; a sweep whose planned settings are not all there
    is an error unless ``allow_partial``."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise DriftUsageError(f"results folder not found: {root}")
    manifest = read_manifest(root)
    files = results_files(root)
    if not files:
        raise DriftUsageError(f"no lm-eval results in {root}: expected <setting>/<model>/results_*.json, written by "
                              f"'drift-eval sweep --output {root}' or 'lm_eval --output_path {root}/<setting> --log_samples'")
    settings: dict = {}
    for rf in sorted((read_run_file(p) for p in files), key=lambda rf: (rf.date, rf.path)):  # newer files win
        st = settings.setdefault(rf.setting, Setting(rf.setting, rf.model_args))
        st.files += [rf.path, *rf.sample_files]
        st.tasks.update(rf.tasks)
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
