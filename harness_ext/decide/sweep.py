"""``drift-eval sweep``: lm-eval tasks under several compensation settings, in one process.

The model is loaded once (``hf-drift``); ``set_compensation`` switches the setting between
runs. Each setting is one ``lm_eval.simple_evaluate`` call with the options the ``lm_eval``
command passes (``--apply_chat_template`` implies ``fewshot_as_multiturn``, as in lm-eval's
CLI), and lm-eval's ``EvaluationTracker`` writes the standard files::

    OUT/sweep.json                                   planned settings and the run's options
    OUT/<setting>/<model>/results_<date>.json        (log:0.25 -> folder log_0.25)
    OUT/<setting>/<model>/samples_<task>_<date>.jsonl
    OUT/<setting>/cache/requests_rank0.db            answers cached as they are produced

Resuming: a setting whose results (and samples) exist is skipped; inside an interrupted
setting, answers already produced come from the cache. lm-eval's own ``use_cache``
(``CachingLM``, one sqlite file per setting because its key does not include the model's
compensation) covers ``generate_until``, stored batch by batch. It passes other request
types straight through, so the project's ``generate_conversation`` and
``position_profile`` requests are cached here in the same sqlite file with lm-eval's key
(``hash_args``), stored after every ``batch_size`` conversations.
"""
from __future__ import annotations

import json
import os
import time

from ..errors import DriftUsageError
from ..files import read_json, write_json_atomic
from ..plugin.request_types import CONVERSATION, NEEDS
from ..settings import parse_settings
from .results import MANIFEST, load_output

BUILTIN_TYPES = ("generate_until", "loglikelihood", "loglikelihood_rolling")


def _manifest(output: str, labels: list, options: dict) -> dict:
    path = os.path.join(output, MANIFEST)
    if os.path.isfile(path):
        old = read_json(path, "sweep manifest")
        if not isinstance(old, dict):
            raise DriftUsageError(f"{path} is not a sweep manifest: delete it (finished settings are kept) and rerun")
        diff = [k for k in options if old.get("options", {}).get(k) != options[k]]
        if diff:
            raise DriftUsageError(f"{output} holds a sweep run with other options ({', '.join(diff)} differ): "
                                  f"rerun with the same options, or use another --output")
        labels = list(old.get("settings", [])) + [lab for lab in labels if lab not in old.get("settings", [])]
    manifest = {"settings": labels, "tasks": options["tasks"], "options": options}
    write_json_atomic(path, manifest, indent=2)
    return manifest


def _finished(output: str, tasks: list) -> set:
    """Labels of settings whose results hold every task, with samples for every non-group task."""
    try:
        out = load_output(output, allow_partial=True)
    except DriftUsageError:
        return set()
    done = set()
    for lab, st in out.settings.items():
        if all(t in st.tasks for t in tasks) and all(tr.is_group or tr.samples for tr in st.tasks.values()):
            done.add(lab)
    return done


class _Counter:
    """Counts requests that reach the model (after the cache), per request type, and caches
    the project's own request types (which lm-eval's ``CachingLM`` passes through)."""

    def __init__(self, lm, chunk: int):
        self.lm, self.chunk = lm, max(1, chunk)
        self.generated = 0
        self.cached = 0
        self._depth = 0
        self._originals = {}

    def install(self, request_types):
        for rtype in request_types:
            if hasattr(type(self.lm), rtype):
                self._originals[rtype] = getattr(self.lm, rtype)
                setattr(self.lm, rtype, self._wrap(rtype, self._originals[rtype]))

    def remove(self):
        for rtype in self._originals:
            self.lm.__dict__.pop(rtype, None)
        self._originals = {}

    def _wrap(self, rtype, original):
        cache_own = rtype not in BUILTIN_TYPES

        def call(requests, *args, **kwargs):
            top = self._depth == 0
            self._depth += 1
            try:
                if not cache_own:
                    if top:
                        self.generated += len(requests)
                    return original(requests, *args, **kwargs)
                return self._cached_call(rtype, original, requests, top, *args, **kwargs)
            finally:
                self._depth -= 1

        return call

    def _cached_call(self, rtype, original, requests, top, *args, **kwargs):
        from lm_eval.api.model import hash_args

        db = getattr(getattr(self.lm, "cache_hook", None), "dbdict", None)
        keys = [hash_args(rtype, r.args) for r in requests]
        out = [db[k] if db is not None and k in db else None for k in keys]
        todo = [i for i, o in enumerate(out) if o is None]
        if rtype != CONVERSATION:
            # keep requests that share work together in a chunk: prompt_offsets requests of
            # one scene (its four axes) share the scene's base runs
            todo.sort(key=lambda i: str(requests[i].args[0]))
        if top:
            self.cached += len(requests) - len(todo)
            self.generated += len(todo)
        for start in range(0, len(todo), self.chunk):
            idx = todo[start:start + self.chunk]
            answers = original([requests[i] for i in idx], *args, **kwargs)
            for i, a in zip(idx, answers):
                out[i] = a
                if db is not None:
                    db[keys[i]] = a
            if db is not None:
                db.commit()
        return out


def _cached_before(db_path: str) -> int:
    if not os.path.isfile(db_path):
        return 0
    from sqlitedict import SqliteDict

    with SqliteDict(db_path, flag="r") as db:
        return len(db)


def run_sweep(output: str, settings: str, tasks: str, model_args: str = "", limit=None, gen_kwargs: str = "",
              batch_size: int = 8, device: str = "cpu", span: str = "system", apply_chat_template: bool = True,
              metadata: str = "", use_cache: bool = True, log=print) -> dict:
    """Run the sweep; returns {label: "done" | "skipped"}."""
    from lm_eval.utils import simple_parse_args_string

    configs = parse_settings(settings, span)
    task_list = [t.strip() for t in str(tasks).split(",") if t.strip()]
    if not task_list:
        raise DriftUsageError("--tasks is empty: give e.g. drift_french")
    margs = simple_parse_args_string(model_args) if model_args else {}
    clash = sorted(set(margs) & {"compensation", "strength", "span"})
    if clash:
        raise DriftUsageError(f"--model-args sets {', '.join(clash)}: give settings with --settings and --span instead")
    if "pretrained" not in margs:
        from ..plugin.local_models import smollm2_dir

        margs["pretrained"] = smollm2_dir()
    try:
        meta = json.loads(metadata) if metadata else {}
    except json.JSONDecodeError as exc:
        raise DriftUsageError(f"--metadata is not JSON ({exc.msg}): give e.g. '{{\"num_conversations\": 4}}'") from None
    if limit is not None and float(limit) <= 0:
        raise DriftUsageError(f"--limit must be > 0, got {limit}")
    gen = simple_parse_args_string(gen_kwargs) if gen_kwargs else None
    options = {"tasks": task_list, "model_args": {k: str(v) for k, v in margs.items()}, "limit": limit,
               "gen_kwargs": gen_kwargs or "", "apply_chat_template": bool(apply_chat_template),
               "metadata": meta, "span": span}
    labels = [c.label() for c in configs]
    output = os.path.abspath(output)
    _manifest(output, labels, options)
    done = _finished(output, task_list)
    todo = [(c, lab) for c, lab in zip(configs, labels) if lab not in done]
    status = {lab: "skipped" for lab in labels if lab in done}
    for i, lab in enumerate(labels, 1):
        if lab in done:
            log(f"[{i}/{len(labels)}] {lab}: results present, skipped")
    if not todo:
        log(f"sweep complete: {len(labels)} settings in {output}")
        return status

    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import make_table

    from ..plugin.model import HFDriftLM

    t0 = time.perf_counter()
    log(f"loading {margs['pretrained']} once for {len(todo)} setting(s)...")
    lm = HFDriftLM.create_from_arg_obj(dict(margs), {"batch_size": batch_size, "device": device})
    log(f"model loaded in {time.perf_counter() - t0:.1f} s")
    # Indexing lm-eval's ~15,000 built-in task files takes seconds; a sweep of the installed
    # plugins' tasks (the drift tasks) does not need it.
    from drift_eval.tasks import task_folder

    task_manager = TaskManager(include_path=[task_folder()], include_defaults=False, metadata={**margs, **meta})
    if any(t not in task_manager.all_tasks for t in task_list):
        task_manager = TaskManager(include_path=[task_folder()], metadata={**margs, **meta})
    unknown = [t for t in task_list if t not in task_manager.all_tasks]
    if unknown:
        raise DriftUsageError(f"unknown task(s) {', '.join(unknown)}: 'lm-eval ls tasks' lists them")
    chat = bool(apply_chat_template)
    for c, lab in todo:
        i = labels.index(lab) + 1
        folder = os.path.join(output, c.folder())
        cache = os.path.join(folder, "cache", "requests")
        before = _cached_before(cache + "_rank0.db") if use_cache else 0
        log(f"[{i}/{len(labels)}] {lab}: running {', '.join(task_list)}"
            + (f" (resuming: {before} cache entries)" if before else ""))
        lm.set_compensation(c)
        counter = _Counter(lm, batch_size if isinstance(batch_size, int) else 1)
        counter.install([*BUILTIN_TYPES, *NEEDS])
        tracker = EvaluationTracker(output_path=folder)
        t1 = time.perf_counter()
        try:
            results = lm_eval.simple_evaluate(
                model=lm, model_args={**margs, **c.model_args()},
                tasks=task_list, batch_size=batch_size, device=device, limit=limit, gen_kwargs=gen,
                use_cache=cache if use_cache else None, log_samples=True, evaluation_tracker=tracker,
                apply_chat_template=chat, fewshot_as_multiturn=chat, task_manager=task_manager)
        finally:
            counter.remove()
        samples = results.pop("samples")
        tracker.save_results_aggregated(results=results, samples=samples)
        for task_name in results["configs"]:
            tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
        log(make_table(results))
        if results.get("groups"):
            log(make_table(results, "groups"))
        total = sum(len(s.get("resps", [])) for task_samples in samples.values() for s in task_samples)
        log(f"[{i}/{len(labels)}] {lab}: done in {time.perf_counter() - t1:.1f} s; requests answered by the model: "
            f"{counter.generated}, from the cache: {total - counter.generated}")
        status[lab] = "done"
    log(f"sweep complete: {len(labels)} settings in {output}")
    return status

