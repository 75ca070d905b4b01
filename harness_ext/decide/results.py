"""Read folders of lm-eval results: runs keyed by (model, setting).

The one loader behind ``drift-eval report``, ``gate``, ``compare``, ``leaderboard`` and the
pytest plugin. It reads any mix of ``drift-eval sweep`` folders and plain
``lm_eval --output_path`` folders, with one or more models::

    OUT/sweep.json                                  (sweeps only: the planned settings)
    OUT/<setting>/<model>/results_<date>.json       a sweep, or lm_eval --output_path OUT/<setting>
    OUT/<model>/results_<date>.json                 lm_eval --output_path OUT (one folder per model)
    .../samples_<task>_<date>.jsonl                 beside each results file (--log_samples)

Every ``results_*.json`` under each folder (up to three folders deep) is read. A run is
keyed by its model (a readable name: the ``pretrained`` name, the GGUF file's name for a
``gguf_file`` or a converted GGUF cache folder, never a cache path) and its setting (the
compensation in ``config.model_args``; ``none`` without one), so folder names do not
matter. Several results files of one run are merged when they hold different tasks; two
that hold the same task are ambiguous, an error naming both files (never "newest wins").
Per-sample values come from the samples files of the same date.

Every file is validated before anything is used (``resultfiles.runfile``: UTF-8, the JSON shape of
lm-eval's results, the samples files against it); a run that logged samples for some tasks
and not for others was cut short. A damaged file stops with one ``DamagedFile`` line that
names it; other problems with one ``DriftUsageError`` line saying what to do. Models are
named by ``resultfiles.names``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from drift_eval import inert
from drift_eval.catalogue import binary, exact_share, share
from drift_eval.errors import DriftUsageError
from drift_eval.logs import log
from drift_eval.metrics.values import is_finite, is_number
from drift_eval.resultfiles.manifest import read_manifest
from drift_eval.resultfiles.names import unique_names
from drift_eval.resultfiles.runfile import TaskResult, merged_provenance, provenance, read_run_file, results_files
from drift_eval.tasks import metric_catalogue


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
    model: str = ""
    doc_hashes: dict | None = None     # doc_id -> lm-eval's doc_hash, for pairing across runs
    several_models: bool = False       # the folder holds other models: name this one in messages
    length: str | None = None          # how long the task's answers were made (``Length.kind``), if it says
    version: str | None = None         # the task's version (lm-eval's ``versions``), if the results say
    binary: bool | None = None         # False: a share, rate or count, never 0/1 outcomes (the task YAML's
    #                                    ``values``: share, count, rate, continuous); None: its values decide

    def spread(self) -> str:
        """``, 95% CI [lo, hi], n=N`` (the parts that are known)."""
        ci = "" if math.isnan(self.lower) else f", 95% CI [{self.lower:.4f}, {self.upper:.4f}]"
        return ci + ("" if self.n is None else f", n={self.n}")

    def where(self) -> str:
        return f"{self.task}/{self.name} under {self.setting}" + (f" for {self.model}" if self.several_models else "")

    def describe(self) -> str:
        se = f" ± {self.stderr:.4f} (stderr)" if isinstance(self.stderr, float) else ""
        val = f"{self.value:.4f}" if isinstance(self.value, float) else repr(self.value)
        return f"{self.where()}: {val}{se}{self.spread()}"

    __repr__ = describe


@dataclass
class Run:
    """The results of one model under one setting (from one or more results files)."""
    model: str
    setting: str
    model_args: dict
    files: list = field(default_factory=list)
    tasks: dict = field(default_factory=dict)   # task or group name -> TaskResult
    provenance: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        return (self.model, self.setting)

    @property
    def label(self) -> str:
        return f"{self.model} [{self.setting}]"

    def task(self, name: str) -> TaskResult:
        if name not in self.tasks:
            raise DriftUsageError(f"{self.label} has no results for '{name}'; it has: "
                                  f"{', '.join(sorted(self.tasks)) or 'nothing'}")
        return self.tasks[name]


class Output:
    """Every run found in one or more results folders, keyed by (model, setting)."""

    def __init__(self, roots: list, runs: dict, manifests: dict):
        self.roots = list(roots)
        self.runs = runs                 # (model, setting) -> Run
        self.manifests = manifests       # root -> sweep.json contents
        self._catalogue = None
        self.notes: list = []            # what the catalogue had to guess (``catalogue``)

    @property
    def catalogue(self) -> dict:
        """``{task: {metric: info}}`` (``drift_eval.catalogue``) for every task the runs hold:
        the definitions each run recorded at run time, or today's task YAML's for results
        that record none (``notes`` says which). It lays reports out; each run's values are
        read with its own (``metric``). Where runs recorded different definitions of one task
        (different task versions), the newest version's lay it out, and ``notes`` says so.
        Tasks in today's YAML order, then the others as found."""
        if self._catalogue is None:
            self._catalogue, self.notes = _merged_definitions(self.runs.values())
        return self._catalogue

    @property
    def root(self) -> str:
        return ", ".join(self.roots)

    # ------------------------------------------------------------------ access
    @property
    def models(self) -> list:
        """Model names, in the order their runs were found."""
        return list(dict.fromkeys(m for m, _ in self.runs))

    @property
    def labels(self) -> list:
        """Setting labels, ``none`` first, then in sweep order (or sorted)."""
        order = [lab for m in self.manifests.values() for lab in m.get("settings", [])]
        rank = {lab: i for i, lab in reversed(list(enumerate(order)))}
        return sorted({s for _, s in self.runs}, key=lambda s: (s != "none", rank.get(s, len(rank)), s))

    def ordered_runs(self) -> list:
        """Runs by model, then by setting."""
        order = {lab: i for i, lab in enumerate(self.labels)}
        models = {m: i for i, m in enumerate(self.models)}
        return sorted(self.runs.values(), key=lambda r: (models[r.model], order[r.setting]))

    def model(self, model: str | None = None) -> str:
        """``model`` if the folder has it; without one, the folder's only model."""
        if model is not None:
            if model not in self.models:
                raise DriftUsageError(f"no results for model '{model}' in {self.root}; models found: "
                                      f"{', '.join(self.models)}")
            return model
        if len(self.models) != 1:
            raise DriftUsageError(f"{self.root} holds results of {len(self.models)} models ({', '.join(self.models)}): "
                                  f"name the one you mean (a gate policy's candidate: or a rule's model:)")
        return self.models[0]

    def settings_of(self, model: str | None = None) -> list:
        m = self.model(model)
        return [lab for lab in self.labels if (m, lab) in self.runs]

    def run(self, setting: str = "none", model: str | None = None) -> Run:
        m = self.model(model)
        if (m, setting) not in self.runs:
            raise DriftUsageError(f"no results for setting '{setting}' of {m} in {self.root}; settings found: "
                                  f"{', '.join(self.settings_of(m))}")
        return self.runs[(m, setting)]

    def metric(self, task: str, name: str, setting: str = "none", model: str | None = None) -> Metric:
        from drift_eval.metrics import stats  # deferred, start-up: loads numpy

        run = self.run(setting, model)
        tr = run.task(task)
        if name not in tr.values:
            raise DriftUsageError(f"{task} under {setting} has no metric '{name}'; it has: "
                                  f"{', '.join(sorted(tr.values))}")
        value = tr.values[name]
        per, hashes = self._per_sample(run, tr, name)
        stderr = tr.stderrs.get(name)
        lo = hi = math.nan
        own = {task: tr.definitions or {}}  # each run's values are read with its own definitions
        kind = binary(own, task, name)
        if per and len(per) > 1:
            lo, hi = stats.mean_interval(list(per.values()), binary=kind, share=share(own, task, name),
                                         exact=exact_share(own, task, name))
        elif is_number(value) and isinstance(stderr, float):
            lo, hi = stats.normal_interval(float(value), stderr)
        n = tr.n if tr.n is not None else (len(per) if per else None)
        hib = tr.higher_is_better.get(name)
        return Metric(task, name, setting, float(value) if is_number(value) else value, stderr, n,
                      lo, hi, per, hib, run.model, hashes, len(self.models) > 1, self._length_kind(run, tr),
                      self._version_of(run, tr), kind)

    @staticmethod
    def _of_tasks(run: Run, tr: TaskResult, describe) -> str | None:
        """``describe(task result)`` of a task, or ``task: description`` of a group's tasks
        together (those it says something of)."""
        if not tr.is_group:
            return describe(tr)
        said = sorted({f"{t}: {d}" for t in tr.subtasks if t in run.tasks and (d := describe(run.tasks[t])) is not None})
        return "; ".join(said) or None

    @classmethod
    def _length_kind(cls, run: Run, tr: TaskResult) -> str | None:
        """The answers' length kind of a task, or of a group's tasks together."""
        return cls._of_tasks(run, tr, lambda x: x.length.kind if x.length is not None else None)

    @classmethod
    def _version_of(cls, run: Run, tr: TaskResult) -> str | None:
        """The task's version, or its tasks' versions together for a group."""
        return cls._of_tasks(run, tr, lambda x: x.version)

    def _per_sample(self, run: Run, tr: TaskResult, name: str):
        """(doc_id -> value, doc_id -> doc_hash) from the logged samples; for a group whose
        aggregate pools its tasks' samples (lm-eval's weighted mean), keyed (task, doc_id)
        over all of them. (None, None) without samples."""
        if tr.samples:
            rows = [s for s in tr.samples if is_number(s.get(name))]
            if not rows:
                return None, None
            return {s["doc_id"]: float(s[name]) for s in rows}, {s["doc_id"]: s.get("doc_hash") for s in rows}
        if tr.is_group and tr.subtasks:
            pooled, hashes = {}, {}
            for sub in tr.subtasks:
                sub_tr = run.tasks.get(sub)
                vals, hs = self._per_sample(run, sub_tr, name) if sub_tr is not None and name in sub_tr.values \
                    else (None, None)
                if not vals:
                    return None, None
                pooled.update({(sub, k): v for k, v in vals.items()})
                hashes.update({(sub, k): h for k, h in hs.items()})
            return pooled, hashes
        return None, None

    def compare(self, task: str, name: str, setting: str, baseline: str = "none", model: str | None = None):
        """Paired difference ``setting − baseline`` (settings of one model) on the samples
        both logged; for fitted metrics without per-sample values (drift_alpha's α), a z
        test on their standard errors; None when neither is possible."""
        from drift_eval.metrics import paired  # deferred, start-up: loads numpy
        from drift_eval.decide.compare import shared_documents  # deferred, start-up: loads numpy

        a, b = self.metric(task, name, setting, model), self.metric(task, name, baseline, model)
        if not a.per_sample or not b.per_sample:
            if all(is_finite(v) for v in (a.value, a.stderr, b.value, b.stderr)):
                return paired.difference_from_errors(a.value, a.stderr, b.value, b.stderr, a.n or 0)
            return None
        docs = shared_documents(a, b, same_hash=False)
        if not docs:
            return None
        return paired.paired_difference([a.per_sample[d] for d in docs], [b.per_sample[d] for d in docs],
                                        binary=a.binary)

    def scalar_metrics(self, setting: str, task: str, model: str | None = None) -> list:
        """Names of the float-valued metrics of a task, in file order."""
        tr = self.run(setting, model).task(task)
        return [m for m, v in tr.values.items() if is_number(v)]

    def task_names(self) -> list:
        names = []
        for run in self.ordered_runs():
            for t in run.tasks:
                if t not in names:
                    names.append(t)
        return names

    def nested_groups(self, keep=None) -> tuple[list, set]:
        """(the outermost groups of groups, such as ``drift_languages``, in task order; every
        task and group under one of them). ``keep(leaves)``, given the set of a top group's
        tasks that are not groups, says which tops count (all by default). Reports and the
        leaderboard show such a family by its top group, with its member groups as one row
        or column each."""
        subs: dict = {}
        for run in self.runs.values():
            for t, tr in run.tasks.items():
                if tr.is_group:
                    subs.setdefault(t, set()).update(tr.subtasks)

        def under(roots) -> set:
            found: set = set()
            todo = [m for t in roots for m in subs[t]]
            while todo:
                t = todo.pop()
                if t not in found:
                    found.add(t)
                    todo += list(subs.get(t, ()))
            return found

        tops = [t for t in self.task_names() if t in subs and subs[t] & set(subs)]
        tops = [t for t in tops if t not in under(tops)]
        if keep is not None:
            tops = [t for t in tops if keep({x for x in under([t]) if x not in subs})]
        return tops, under(tops)


def _version_key(version: str | None) -> tuple:
    try:
        return (1, float(version))
    except (TypeError, ValueError):
        return (0, 0.0)


def _merged_definitions(runs) -> tuple[dict, list]:
    """(catalogue, notes) of ``Output.catalogue``."""
    chosen: dict = {}     # task -> TaskResult whose definitions are used
    differ, today = set(), set()
    for run in runs:
        for name, tr in run.tasks.items():
            if tr.definitions is None:
                continue
            if not tr.recorded:
                today.add(name)
            prev = chosen.get(name)
            if prev is not None and prev.definitions != tr.definitions:
                differ.add(name)
            if prev is None or _version_key(tr.version) > _version_key(prev.version):
                chosen[name] = tr
    order = list(metric_catalogue())
    names = sorted(chosen, key=lambda t: order.index(t) if t in order else len(order))
    notes = []
    if today:
        notes.append(f"read with today's task definitions (the results record none): {', '.join(sorted(today))}")
    for name in sorted(differ):
        notes.append(f"{name}: runs recorded different metric definitions (task versions differ); read with "
                     f"those of version {chosen[name].version or 'unknown'}")
    return {name: chosen[name].definitions for name in names}, notes


def load_output(*roots, allow_partial: bool = False) -> Output:
    """Load every run under ``roots`` (folders); a sweep whose planned settings are not all
    there is an error unless ``allow_partial``."""
    roots = [os.fspath(r) for r in roots]
    if not roots:
        raise DriftUsageError("no results folder given")
    manifests, files = {}, []
    for root in roots:
        if not os.path.isdir(root):
            raise DriftUsageError(f"results folder not found: {root}")
        manifest = read_manifest(root)
        if manifest is not None:
            manifests[root] = manifest
        found = results_files(root)
        if not found:
            raise DriftUsageError(f"no lm-eval results in {root}: expected <setting>/<model>/results_*.json, written "
                                  f"by 'drift-eval sweep --output {root}' or 'lm_eval --output_path {root}/<setting> "
                                  f"--log_samples'")
        files += [(root, read_run_file(p)) for p in found]
    names = unique_names([rf for _, rf in files])
    runs: dict = {}
    where: dict = {}   # (model, setting, task) -> file
    by_root: dict = {}
    for root, rf in sorted(files, key=lambda x: (x[1].date, x[1].path)):
        name = names[id(rf)]
        key = (name, rf.setting)
        run = runs.setdefault(key, Run(name, rf.setting, rf.model_args))
        for task in rf.tasks:
            other = where.setdefault((*key, task), rf.path)
            if other != rf.path and not rf.tasks[task].is_group:
                raise DriftUsageError(f"two results for {name} under {rf.setting}, task {task}: {other} and "
                                      f"{rf.path}; move one of them away (one run per model, setting and task)")
        run.files += [rf.path, *rf.sample_files]
        run.tasks.update(rf.tasks)
        run.provenance = {**merged_provenance(run.provenance, provenance(rf, name)), "files": run.files}
        by_root.setdefault(root, {})[key] = run
    for root, manifest in manifests.items():
        present = {r.setting for r in by_root.get(root, {}).values()}
        missing = [s for s in manifest["settings"] if s not in present]
        expected_tasks = manifest.get("tasks") or []
        incomplete = [f"{r.setting} ({', '.join(t for t in expected_tasks if t not in r.tasks)})"
                      for r in by_root.get(root, {}).values()
                      if r.setting in manifest["settings"] and any(t not in r.tasks for t in expected_tasks)]
        if (missing or incomplete) and not allow_partial:
            what = "; ".join(filter(None, [
                f"no results for {', '.join(missing)}" if missing else "",
                f"tasks missing for {', '.join(incomplete)}" if incomplete else ""]))
            raise DriftUsageError(f"{root} holds a partial sweep ({what}): finish it with "
                                  f"'drift-eval sweep --output {root}' (same options) before using the results")
    output = Output(roots, runs, manifests)
    output.catalogue  # noqa: B018 (gathered now, so that what it had to guess is said once, here)
    for note in output.notes:
        log.warning("%s: %s", output.root, inert.terminal(note, one_line=True))
    return output
