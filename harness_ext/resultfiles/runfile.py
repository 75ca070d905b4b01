"""One lm-eval results file and its samples files, read and validated (``read_run_file``),
for the results loader (``decide.results``) and ``drift-eval sweep``.

Every file is validated before anything is used: UTF-8, the JSON shape of lm-eval's
results, and in each samples file, per filter, one line per document with distinct
``doc_id``s, as many as the results file's ``n-samples.effective``, each metric of one
kind (number, list...) throughout, and each value in the range its task's definition
declares (as the run recorded it, ``drift_eval.catalogue.recorded``). A damaged file stops
with one ``DamagedFile`` line that names it."""
from __future__ import annotations

import datetime
import glob
import json
import os
import re
from dataclasses import dataclass, field

from drift_eval.catalogue import STAMP, recorded, value_range
from drift_eval.errors import DamagedFile, DriftUsageError
from drift_eval.files import read_json, read_jsonl
from drift_eval.metrics.values import is_finite, is_number
from drift_eval.settings import parse_model_args, setting_label
from drift_eval.tasks import metric_catalogue

_RESULTS_RE = re.compile(r"^results_(?P<date>.+)\.json$")


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
    definitions: dict | None = None    # metric -> info (``drift_eval.catalogue``): as the run recorded
    #                                    them, else today's task YAML's (None: a task of another package)
    recorded: bool = False             # whether ``definitions`` are the run's own


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


def _date(res: dict, fallback: str) -> str:
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


def provenance(rf: "RunFile", name: str) -> dict:
    """What one results file says of how its run was made (model, versions, seeds, lengths...)."""
    res, cfg = rf.raw, rf.raw["config"]
    configs = res.get("configs") or {}
    versions = {(c.get("metadata") or {}).get(STAMP) for c in configs.values()
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


def merged_provenance(old: dict, new: dict) -> dict:
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


def _check_shares(tr: TaskResult, path: str, spath: str) -> None:
    """A metric whose every logged sample is 0 or 1 is a share: its value in the results file
    lies in [0, 1] (a value outside cannot be its samples' mean, whatever its interval says).
    A metric's declared kind (``drift_eval.catalogue.KINDS``, in the task's definitions)
    says the range of each sample: a share lies in [0, 1], a count or a rate is at least 0,
    and a cause of "not kept" (role ``cause``) is 0 or 1."""
    catalogue = {tr.name: tr.definitions or {}}
    for metric, info in catalogue[tr.name].items():
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
                                      f"{kind} (its task's definition)")
    for metric, v in tr.values.items():
        if not is_number(v) or 0 <= v <= 1:
            continue
        logged = [s[metric] for s in tr.samples if is_number(s.get(metric))]
        if logged and all(x in (0, 1) for x in logged):
            raise _damaged(path, f"results['{tr.name}']['{metric},none'] is {v!r}: a share of 0/1 samples "
                                 f"lies in [0, 1]")


def _define(out: dict, res: dict, path: str) -> None:
    """Each task's ``definitions``: the metric definitions the run recorded in its results
    JSON (``drift_eval.catalogue.recorded``), else, for a task of this package whose results
    record none, today's task YAML's (``recorded`` False: the loader says so)."""
    today = metric_catalogue()
    try:
        own = recorded(res, path, today)
    except ValueError as exc:
        raise _damaged(path, f"records a metric definition that is not one ({exc})") from None
    for name, tr in out.items():
        if name in own:
            tr.definitions, tr.recorded = own[name], True
        else:
            tr.definitions = today.get(name)


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
    _define(out, res, path)
    missing = []
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
        _check_shares(tr, path, spath)
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
