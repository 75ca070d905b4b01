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

Every file is validated before anything is used: UTF-8, the JSON shape of lm-eval's
results, and in each samples file, per filter, one line per document with distinct
``doc_id``s, as many as the results file's ``n-samples.effective``, each metric of one
kind (number, list...) throughout. A run that logged samples for some tasks and not for
others was cut short. A damaged file stops with one ``DamagedFile`` line that names it;
other problems with one ``DriftUsageError`` line saying what to do.
"""
from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field

from drift_eval.errors import DamagedFile, DriftUsageError
from drift_eval.files import read_json, read_jsonl
from drift_eval.metrics.values import is_finite, is_number
from drift_eval.settings import parse_model_args, setting_label

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
class TaskResult:
    name: str
    values: dict                       # metric -> value (float, or a list for profiles)
    stderrs: dict                      # metric -> float or None
    n: int | None
    higher_is_better: dict
    samples: list | None = None        # logged samples (dicts), when present
    is_group: bool = False
    subtasks: list = field(default_factory=list)  # a group's tasks (lm-eval's group_subtasks)
    length: "Length | None" = None     # how long its answers were made (generation tasks)
    version: str | None = None         # the task's version, from the results' ``versions``


@dataclass(frozen=True)
class Length:
    """How long a generation task's answers were made: ``kind`` is ``forced`` (every answer
    forced to ``tokens``), ``unforced`` (none asked: natural ends, at most ``tokens``) or
    ``partly forced`` (forced, but the backend forced only some answers); runs of different
    kinds are not the same test and are never compared."""
    kind: str
    tokens: int
    share: float | None = None  # of the answers really forced, for ``partly forced``
    on_purpose: bool = False    # a forced-length task run unforced (``--gen_kwargs min_new_tokens=0``)

    def __str__(self) -> str:
        if self.kind == "forced":
            return f"forced to {self.tokens} tokens"
        if self.kind == "unforced":
            return f"{'unforced on purpose' if self.on_purpose else 'natural'}, at most {self.tokens} tokens"
        return f"asked to force {self.tokens} tokens, forced in {self.share:.0%} of answers"


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


_CACHE_KEY = re.compile(r"^(?P<name>.+)-(?P<key>[0-9a-f]{16})$")
_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")


def _is_path(text: str) -> bool:
    """A file-system path rather than a hub name: absolute (POSIX or Windows), ``~``- or
    ``.``-relative, or written with a placeholder for a machine's folder (``$DRIFT_CACHE_DIR/...``,
    ``$MODELS/...``: docs/results/README.md)."""
    return os.path.isabs(text) or bool(_WINDOWS.match(text)) or text.startswith(("~", ".", "$"))


def _parts(text: str) -> list:
    return [p for p in re.split(r"[\\/]", text) if p]


def converted_gguf(pretrained) -> tuple[str, str] | None:
    """(GGUF file name, content key) when ``pretrained`` is a folder of drift_eval's GGUF
    conversion cache (``.../gguf/<file name>-<key>``, on any machine or as
    ``$DRIFT_CACHE_DIR/gguf/<file name>-<key>``); None otherwise."""
    text = str(pretrained or "").rstrip("/\\")
    parts = _parts(text) if _is_path(text) else []
    match = _CACHE_KEY.match(parts[-1]) if len(parts) > 1 and parts[-2] == "gguf" else None
    return (match.group("name"), match.group("key")) if match else None


def model_name(model_args: dict, res: dict) -> str:
    """A readable name for a run's model: the GGUF file's name (``gguf_file``, or a
    converted GGUF cache folder ``.../gguf/<file>-<key>``), a hub name as it is, a local
    folder's name, never a cache path."""
    gguf = model_args.get("gguf_file")
    if isinstance(gguf, str) and gguf:
        return os.path.splitext(_parts(gguf)[-1])[0]
    pretrained = model_args.get("pretrained") or res.get("model_name") or res["config"].get("model") or "model"
    text = str(pretrained).rstrip("/\\")
    if _is_path(text):
        converted = converted_gguf(text)
        return converted[0] if converted else (_parts(text) or [text])[-1]
    return text


def _date(res: dict, fallback: str) -> str:
    import datetime

    stamp = res.get("date")
    if is_finite(stamp):
        return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return fallback


def _text(v) -> str | None:
    if v is None or v == "":
        return None
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


def _length(tr: TaskResult, config: dict) -> Length | None:
    """How ``tr``'s answers were made, from what its requests asked (the logged samples'
    generation kwargs, else the task's config), the task's own record of it
    (``metadata.answer_length``) and whether the backend forced them (``forced_length``)."""
    gen = None
    for s in tr.samples or []:
        args = (s.get("arguments") or {}).get("gen_args_0") if isinstance(s.get("arguments"), dict) else None
        gen = args.get("arg_1") if isinstance(args, dict) else None
        break
    if not isinstance(gen, dict):
        gen = config.get("generation_kwargs") if isinstance(config, dict) else None
    if not isinstance(gen, dict) or not is_number(gen.get("max_gen_toks")):
        return None
    top = int(gen["max_gen_toks"])
    said = ((config.get("metadata") or {}) if isinstance(config, dict) else {}).get("answer_length")
    asked = said == "forced" if said in ("forced", "unforced") else \
        (is_number(gen.get("min_new_tokens")) and gen["min_new_tokens"] >= top)
    if not asked:
        return Length("unforced", top, on_purpose=said == "unforced")
    share = tr.values.get("forced_length")
    if is_number(share) and share < 1:
        return Length("partly forced", top, float(share))
    return Length("forced", top)


def _version(v) -> str | None:
    """A task's version as lm-eval writes it (a number, or a string; ``N/A`` for none), in
    one form: ``3``, ``3.0`` and ``"3.0"`` are the same version."""
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return v if v not in ("", "N/A") else None
    return str(float(v)) if is_finite(v) else None


def _provenance(rf: "RunFile", name: str) -> dict:
    res, cfg = rf.raw, rf.raw["config"]
    configs = res.get("configs") or {}
    versions = {(c.get("metadata") or {}).get("lm_eval_drift_version") for c in configs.values()
                if isinstance(c, dict) and isinstance(c.get("metadata"), dict)} - {None}
    seeds = [cfg.get(k) for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")]
    lengths = {t: str(tr.length) for t, tr in rf.tasks.items() if not tr.is_group and tr.length is not None}
    task_versions = {t: tr.version for t, tr in rf.tasks.items() if not tr.is_group and tr.version is not None}
    out = {
        "model": name, "pretrained": _text(rf.model_args.get("pretrained")),
        "revision": _text(cfg.get("model_revision") or rf.model_args.get("revision")),
        "model_sha": _text(cfg.get("model_sha")),
        "lm_eval_version": _text(res.get("lm_eval_version")),
        "lm_eval_drift_version": ", ".join(sorted(map(str, versions))) or None,
        "transformers_version": _text(res.get("transformers_version")),
        "git_hash": _text(res.get("git_hash")), "date": _date(res, rf.date),
        "gen_kwargs": _text(cfg.get("gen_kwargs")), "limit": _text(cfg.get("limit")),
        "seed": "/".join("-" if x is None else str(x) for x in seeds) if any(x is not None for x in seeds) else None,
        "chat_template": "yes" if res.get("chat_template") else ("no" if "chat_template" in res else None),
        "length": "; ".join(f"{t}: {m}" for t, m in lengths.items()) or None,
        "task_versions": "; ".join(f"{t} {v}" for t, v in task_versions.items()) or None,
    }
    return {k: v for k, v in out.items() if v is not None}


def _merged_provenance(old: dict, new: dict) -> dict:
    """One run's provenance over all its results files (tasks run at different times: a
    sweep resumed on newer code, a task added later): each field's distinct values in file
    order, ``length`` and ``task_versions`` joined per task."""
    out = {}
    for key in [*old, *(k for k in new if k not in old)]:
        if key == "files":
            continue
        a, b = old.get(key), new.get(key)
        sep = "; " if key in ("length", "task_versions") else " / "
        seen = a.split(sep) if a is not None else []
        out[key] = a if b is None or b in seen else (b if a is None else f"{a}{sep}{b}")
    return out


def _float(v):
    return float(v) if is_number(v) else None


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


#: a task or group name as lm-eval's own tasks write them (all of them match): it is part of
#: a samples file's name, so it never holds a path separator, a space or a leading dot
TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _check_names(res: dict, path: str) -> None:
    """Every task and group name of a results file matches ``TASK_NAME``; a name that does
    not (``../x``, a control character...) is damage, reported before the name is used."""
    names = [n for section in ("results", "groups", "n-samples", "group_subtasks", "configs", "versions")
             if isinstance(res.get(section), dict) for n in res[section]]
    names += [t for subs in (res.get("group_subtasks") or {}).values() for t in subs]
    for name in names:
        if not isinstance(name, str) or not TASK_NAME.fullmatch(name) or ".." in name:
            raise _damaged(path, f"holds the task name {name!r}, not a task name (letters, digits, '_', '.', '-')")


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
    _check_names(res, path)


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
            if m in s and s[m] is not None:  # null: the value is not defined for this sample
                if is_number(s[m]) and not is_finite(s[m]):
                    raise _damaged(path, f"line {i} has '{m}' {s[m]!r}, not a finite number")
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


def _check_shares(tr: TaskResult, path: str, spath: str, catalogue: dict) -> None:
    """A metric whose every logged sample is 0 or 1 is a share: its value in the results file
    lies in [0, 1] (a value outside cannot be its samples' mean, whatever its interval says).
    A metric's declared kind in its task YAML (``drift_eval.tasks.KINDS``) says the range of
    each sample: a share lies in [0, 1], a count or a rate is at least 0, and a cause of "not
    kept" (role ``cause``) is 0 or 1."""
    from drift_eval.tasks import value_range

    for metric, info in (catalogue.get(tr.name) or {}).items():
        cause = "cause" in (info.get("roles") or ())
        lo, hi = (0, 1) if cause else value_range(catalogue, tr.name, metric)
        if lo is None and hi is None:
            continue
        for s in tr.samples:
            x = s.get(metric)
            outside = (lo is not None and x < lo) or (hi is not None and x > hi) if is_number(x) else False
            if is_number(x) and (outside or (cause and x not in (0, 1))):
                kind = ("a cause of 'not kept', 0 or 1" if cause else
                        f"a {info['values']}, " + (f"in [{lo:g}, {hi:g}]" if hi is not None else f"at least {lo:g}"))
                raise _damaged(spath, f"doc {s.get('doc_id')!r}: {metric} is {x!r}, but {tr.name}'s {metric} is "
                                      f"{kind} (its task YAML)")
    for metric, v in tr.values.items():
        if not is_number(v) or 0 <= v <= 1:
            continue
        logged = [s[metric] for s in tr.samples if is_number(s.get(metric))]
        if logged and all(x in (0, 1) for x in logged):
            raise _damaged(path, f"results['{tr.name}']['{metric},none'] is {v!r}: a share of 0/1 samples "
                                 f"lies in [0, 1]")


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
                    stderrs[metric[: -len("_stderr")]] = _float(v) if is_finite(v) else None  # none to give
                else:
                    if is_number(v) and not is_finite(v):
                        raise _damaged(path, f"{section}['{name}']['{key}'] is {v!r}, not a finite number")
                    values[metric] = v
            for metric in values:  # fitted metrics (drift_alpha) report their bootstrap error as <metric>_se
                if stderrs.get(metric) is None and is_number(values.get(f"{metric}_se")):
                    stderrs[metric] = _float(values[f"{metric}_se"])
            n = (n_samples.get(name) or {}).get("effective")
            subtasks = list((res.get("group_subtasks") or {}).get(name) or [])
            # a group without aggregate metrics (drift_alpha, drift_decode) is not in "groups",
            # only in "group_subtasks"; it logs no samples of its own
            tr = TaskResult(name, values, stderrs, n, dict(hib_all.get(name) or {}),
                            is_group=section == "groups" or name in groups or bool(subtasks), subtasks=subtasks)
            if section == "groups" and name in out:  # lm-eval lists groups in both sections
                out[name].is_group = True
                continue
            out[name] = tr
    from drift_eval.tasks import metric_catalogue

    missing = []
    catalogue = metric_catalogue()  # the declared kinds of the metrics, read once per results file
    listed = set(os.listdir(folder))  # samples files are found in the folder's listing, by name
    for name, tr in out.items():
        if tr.is_group:
            continue
        fname = f"samples_{name}_{date}.jsonl"
        spath = os.path.join(folder, fname)
        if fname not in listed:
            missing.append(spath)
            continue
        samples = read_jsonl(spath, "samples file", remedy=REMEDY, line_ends=True)
        _check_samples(samples, spath, name, n_samples, list(tr.values))
        tr.samples = [s for s in samples if s.get("filter", "none") == "none"]
        _check_shares(tr, path, spath, catalogue)
        sample_files.append(spath)
    configs = res.get("configs") if isinstance(res.get("configs"), dict) else {}
    versions = res.get("versions") if isinstance(res.get("versions"), dict) else {}
    for name, tr in out.items():
        if not tr.is_group:
            tr.length = _length(tr, configs.get(name) or {})
            tr.version = _version(versions.get(name))
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
    model_args = parse_model_args(res["config"].get("model_args"))
    try:
        label = setting_label(model_args)
    except DriftUsageError as exc:
        raise _damaged(path, f"config.model_args: {exc.message}") from None
    tasks, sample_files = _task_results(res, path, match.group("date"))
    return RunFile(path, match.group("date"), res, model_args, label, tasks, sample_files)


class Output:
    """Every run found in one or more results folders, keyed by (model, setting)."""

    def __init__(self, roots: list, runs: dict, manifests: dict):
        self.roots = list(roots)
        self.runs = runs                 # (model, setting) -> Run
        self.manifests = manifests       # root -> sweep.json contents
        self._catalogue = None

    @property
    def catalogue(self) -> dict:
        """``drift_eval.tasks.metric_catalogue()``, read once."""
        if self._catalogue is None:
            from drift_eval.tasks import metric_catalogue

            self._catalogue = metric_catalogue()
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
        from drift_eval.metrics import stats
        from drift_eval.tasks import binary, exact_share, share

        run = self.run(setting, model)
        tr = run.task(task)
        if name not in tr.values:
            raise DriftUsageError(f"{task} under {setting} has no metric '{name}'; it has: "
                                  f"{', '.join(sorted(tr.values))}")
        value = tr.values[name]
        per, hashes = self._per_sample(run, tr, name)
        stderr = tr.stderrs.get(name)
        lo = hi = math.nan
        kind = binary(self.catalogue, task, name)
        if per and len(per) > 1:
            lo, hi = stats.mean_interval(list(per.values()), binary=kind, share=share(self.catalogue, task, name),
                                         exact=exact_share(self.catalogue, task, name))
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
        from drift_eval.metrics import stats
        from drift_eval.decide.compare import shared_documents

        a, b = self.metric(task, name, setting, model), self.metric(task, name, baseline, model)
        if not a.per_sample or not b.per_sample:
            if all(is_finite(v) for v in (a.value, a.stderr, b.value, b.stderr)):
                return stats.difference_from_errors(a.value, a.stderr, b.value, b.stderr, a.n or 0)
            return None
        docs = shared_documents(a, b, same_hash=False)
        if not docs:
            return None
        return stats.paired_difference([a.per_sample[d] for d in docs], [b.per_sample[d] for d in docs],
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


def _identity(model_args: dict) -> tuple[str, str]:
    """(what makes two runs' models one model, a short stable tag for it). A converted GGUF
    cache folder is its file's content key (``drift_eval.plugin.local_models``), so the same
    file is one model on every machine and under ``$DRIFT_CACHE_DIR``; any other model is
    ``pretrained`` and ``gguf_file`` as written, tagged by a hash of them."""
    converted = converted_gguf(model_args.get("pretrained"))
    if converted:
        return f"gguf content {converted[1]}", converted[1][:8]
    ident = f"{model_args.get('pretrained', '')}".rstrip("/\\") + f"|{model_args.get('gguf_file') or ''}"
    return ident, hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:8]  # a JSON name may hold a lone surrogate


def _unique_names(files: list) -> dict:
    """RunFile -> model name; two different models with one readable name are told apart
    as ``<name>@<tag>``: a converted GGUF file's content key (its first 8 digits), else a
    hash of ``pretrained`` (and ``gguf_file``), never a path."""
    names = {id(rf): model_name(rf.model_args, rf.raw) for rf in files}
    idents = {}
    for rf in files:
        idents.setdefault(names[id(rf)], set()).add(_identity(rf.model_args))
    for rf in files:
        if len(idents[names[id(rf)]]) > 1:
            names[id(rf)] = f"{names[id(rf)]}@{_identity(rf.model_args)[1]}"
    return names


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
    names = _unique_names([rf for _, rf in files])
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
        run.provenance = {**_merged_provenance(run.provenance, _provenance(rf, name)), "files": run.files}
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
    return Output(roots, runs, manifests)
