"""``drift-eval sweep``: lm-eval tasks under several compensation settings, in one process.

The model is loaded once (``hf-drift``); ``set_compensation`` switches the setting between
runs. Each setting is one ``lm_eval.simple_evaluate`` call with the options the ``lm_eval``
command passes (``--apply_chat_template`` implies ``fewshot_as_multiturn``, as in lm-eval's
CLI), and lm-eval's ``EvaluationTracker`` writes the standard files::

    OUT/sweep.json                                   planned settings and the run's options
    OUT/<setting>/<model>/results_<date>.json        (log:0.25 -> folder log_0.25)
    OUT/<setting>/<model>/samples_<task>_<date>.jsonl
    OUT/<setting>/cache/answers.sqlite               answers (JSON) stored as they are produced

``<model>`` is the model's readable name (``drift_eval.resultfiles.names.model_name``: the GGUF
file's name, a hub name, a folder's name; ``/`` becomes ``__``), never the path it was
loaded from, so the same run gets the same folders on every machine.

Order of work: every option, the tasks (built once, so that their ``--metadata`` and the
language-ID model are checked), the model's files and chat template are checked before the
model loads; ``sweep.json`` is written when the first setting starts. The tracker writes
into a hidden staging folder; the files are read back through the results loader's checks
and then renamed into place, samples first and the results file last, so a results file
in place means a complete setting.

Resuming: a setting whose files are complete and valid is skipped. Any other files of a
setting (damaged, cut short, left by a killed run) are moved aside as ``*.damaged`` and
that setting runs again; inside it, answers already produced come from the cache
(``answer_cache``, JSON only). lm-eval's own request types are stored as the backend
produces them (its cache hook), the project's own request types after every
``batch_size`` requests. A folder written by an earlier version, whose model folders are
named after lm-eval's sanitised ``pretrained`` path, resumes the same way: finished
settings are found whatever their model folder is called (and stay where they are), the
rest is published under the readable name. A sweep of the bundled model begun before its
conversion cache was keyed by content goes on with the converted folder it began with.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import time

from drift_eval import inert
from drift_eval.errors import DriftUsageError
from drift_eval.files import check_output_folder, folder_lock
from drift_eval.logs import log as plugin_log
from drift_eval.plugin import answer_cache, cached_serving, local_models, sweep_folder
from drift_eval.resultfiles.manifest import read_manifest
from drift_eval.resultfiles.names import converted_gguf
from drift_eval.settings import int_option, parse_settings
from drift_eval.tasks import task_folder

RESUME = "rerun the same command to resume (finished settings and cached answers are kept)"


def _warn(line: str) -> None:
    print(f"drift-eval: warning: {inert.terminal(line)}", file=sys.stderr, flush=True)


def _log(line: str) -> None:
    """A progress line, out at once even when stdout is a pipe (a CI log, ``| tee``), its
    control and format characters escaped (it names models and folders)."""
    print(inert.terminal(line), flush=True)


class _Lines(logging.Handler):
    def __init__(self, log, warn):
        super().__init__(logging.INFO)
        self.log, self.warn = log, warn

    def emit(self, record):
        (self.warn if record.levelno >= logging.WARNING else self.log)(record.getMessage())


@contextlib.contextmanager
def _plugin_lines(log, warn):
    """The plugin's own log lines (``drift_eval.logs``: progress while a setting generates,
    how each setting's time went, warnings) shown among the sweep's, for its duration."""
    handler, level, propagate = _Lines(log, warn), plugin_log.level, plugin_log.propagate
    plugin_log.addHandler(handler)
    plugin_log.setLevel(logging.INFO)
    plugin_log.propagate = False  # not twice where lm-eval's handler is set up
    try:
        yield
    finally:
        plugin_log.removeHandler(handler)
        plugin_log.setLevel(level)
        plugin_log.propagate = propagate


# ------------------------------------------------------------------------ checks before the model loads
def _options(settings, tasks, opts):
    """(the settings, the task names, the model args, the metadata, the generation kwargs),
    each checked, before anything loads."""
    # deferred, start-up: loads jinja2, lm_eval, numpy, requests, yaml
    from lm_eval.utils import simple_parse_args_string

    # deferred, start-up: loads datasets, huggingface_hub, jinja2, lm_eval, numpy, pandas, requests, tqdm, yaml
    from drift_eval.plugin.task_base import check_generation_kwargs

    model_args, limit, gen_kwargs, batch_size, metadata, span = (
        opts.model_args, opts.limit, opts.gen_kwargs, opts.batch_size, opts.metadata, opts.span)

    configs = parse_settings(settings, span)
    task_list = [t.strip() for t in str(tasks).split(",") if t.strip()]
    if not task_list:
        raise DriftUsageError("--tasks is empty: give e.g. drift_french")
    try:
        margs = simple_parse_args_string(model_args) if model_args else {}
    except ValueError:
        raise DriftUsageError(f"--model-args must be key=value pairs separated by commas, got '{model_args}'") from None
    clash = sorted(set(margs) & {"compensation", "strength", "span"})
    if clash:
        raise DriftUsageError(f"--model-args sets {', '.join(clash)}: give settings with --settings and --span instead")
    try:
        meta = json.loads(metadata) if metadata else {}
    except json.JSONDecodeError as exc:
        raise DriftUsageError(f"--metadata is not JSON ({exc.msg}): give e.g. '{{\"num_conversations\": 4}}'") from None
    if not isinstance(meta, dict):
        raise DriftUsageError(f"--metadata must be a JSON object, e.g. '{{\"num_conversations\": 4}}', got {metadata}")
    if limit is not None and not float(limit) > 0:
        raise DriftUsageError(f"--limit must be > 0, got {limit}")
    if batch_size != "auto":
        int_option("--batch-size", batch_size, 1)
    try:
        gen = simple_parse_args_string(gen_kwargs) if gen_kwargs else None
    except ValueError:
        raise DriftUsageError(f"--gen-kwargs must be key=value pairs separated by commas, got '{gen_kwargs}'") from None
    if gen:
        check_generation_kwargs(gen, "--gen-kwargs")
    return configs, task_list, margs, meta, gen


def _check_model(margs: dict, chat: bool, log) -> None:
    """The model's config (and, for the chat template, its tokenizer) load, before the weights do."""
    # deferred, start-up: loads huggingface_hub, jinja2, numpy, tqdm, transformers, yaml
    from transformers import AutoConfig, AutoTokenizer

    source = margs["pretrained"]
    if margs.get("gguf_file"):
        source = local_models.cached_from_gguf(source, margs["gguf_file"], log=log)
    common = {k: margs[k] for k in ("revision", "trust_remote_code") if k in margs}
    try:
        AutoConfig.from_pretrained(source, **common)
        tok = AutoTokenizer.from_pretrained(margs.get("tokenizer") or source, **common) if chat else None
    except (OSError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DriftUsageError(f"cannot load the model '{margs['pretrained']}' ({first}): check pretrained= in "
                              f"--model-args") from None
    if chat and not getattr(tok, "chat_template", None):
        raise DriftUsageError(f"the model '{margs['pretrained']}' has no chat template: pass --no-chat-template "
                              f"(base models), or use a chat model")


def _task_manager(task_list: list, metadata: dict):
    """A TaskManager that knows ``task_list``. Indexing lm-eval's ~15,000 built-in task files
    takes seconds; a sweep of the installed plugins' tasks (the drift tasks) does not need it."""
    # deferred, start-up: loads datasets, huggingface_hub, jinja2, lm_eval, numpy, pandas, requests, tqdm, yaml
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=[task_folder()], include_defaults=False, metadata=metadata)
    if any(t not in tm.all_tasks for t in task_list):
        tm = TaskManager(include_path=[task_folder()], metadata=metadata)
    unknown = [t for t in task_list if t not in tm.all_tasks]
    if unknown:
        raise DriftUsageError(f"unknown task(s) {', '.join(unknown)}: 'lm-eval ls tasks' lists them")
    return tm


def _default_model(output: str) -> str:
    """The bundled model's converted folder, or, for a sweep of it begun in ``output`` with
    another converted folder (an earlier version keyed the conversion cache by the file's
    path, size and modification time), the folder it began with: the settings still to run
    then use the model the finished ones used."""
    manifest = read_manifest(output) if os.path.isdir(output) else None
    earlier = (((manifest or {}).get("options") or {}).get("model_args") or {}).get("pretrained")
    converted = converted_gguf(earlier) if isinstance(earlier, str) and os.path.isabs(earlier) else None
    if not converted or converted[0] != os.path.splitext(local_models.SMOLLM2_FILE)[0]:
        return local_models.smollm2_dir()
    if os.path.isfile(os.path.join(earlier, "config.json")):
        return earlier
    current = local_models.smollm2_dir()
    if earlier != current:
        raise DriftUsageError(f"{output} holds a sweep of the bundled model converted at {earlier}, which is gone: "
                              f"finish it where that folder is, or use another --output")
    return current


# ------------------------------------------------------------------------ the sweep
#: a setting label: the sweep stops itself (SIGSTOP) the moment it says that setting is
#: running, so that a test can interrupt it at that point and no other, whatever the load
#: (tests/plugin/test_reliability_sweep.py); unset in use
STOP_AT_ENV = "DRIFT_EVAL_STOP_AT"


def _stop_at(labels: list) -> str | None:
    """``$DRIFT_EVAL_STOP_AT``, checked: one of this sweep's setting labels, or unset."""
    value = os.environ.get(STOP_AT_ENV)
    if value is None or value == "":
        return None
    if value not in labels:
        raise DriftUsageError(f"{STOP_AT_ENV} is {value!r}, not one of this sweep's settings ({', '.join(labels)}): "
                              f"unset it")
    return value


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """The options of ``drift-eval sweep`` besides its folder, settings and tasks, as the
    command takes them: ``--model-args``, ``--limit``, ``--gen-kwargs``, ``--batch-size``,
    ``--device``, ``--span``, ``--no-chat-template`` (``apply_chat_template``),
    ``--metadata`` and ``--no-cache`` (``use_cache``)."""
    model_args: str = ""
    limit: object = None
    gen_kwargs: str = ""
    batch_size: object = 8
    device: str = "cpu"
    span: str = "system"
    apply_chat_template: bool = True
    metadata: str = ""
    use_cache: bool = True


def run_sweep(output: str, settings: str, tasks: str, opts: SweepOptions = SweepOptions(), log=_log,
              warn=_warn) -> dict:
    """Run the sweep; returns {label: "done" | "skipped"}."""
    limit, span, apply_chat_template = opts.limit, opts.span, opts.apply_chat_template
    configs, task_list, margs, meta, gen = _options(settings, tasks, opts)
    output = os.path.abspath(output)
    if "pretrained" not in margs:
        margs["pretrained"] = _default_model(output)
    options = {"tasks": task_list, "model_args": {k: str(v) for k, v in margs.items()}, "limit": limit,
               "gen_kwargs": opts.gen_kwargs or "", "apply_chat_template": bool(apply_chat_template),
               "metadata": meta, "span": span}
    labels = [c.label() for c in configs]
    stop_at = _stop_at(labels)
    check_output_folder(output, "--output")
    with folder_lock(output, "drift-eval sweep"):
        planned = sweep_folder.check_manifest(output, options)
        planned += [lab for lab in labels if lab not in planned]
        done = {lab for c, lab in zip(configs, labels)
                if sweep_folder.complete(os.path.join(output, c.folder()), lab, task_list, log)}
        status = {lab: "skipped" for lab in labels if lab in done}
        for i, lab in enumerate(labels, 1):
            if lab in done:
                log(f"[{i}/{len(labels)}] {lab}: results present, skipped")
        todo = [(c, lab) for c, lab in zip(configs, labels) if lab not in done]
        if not todo:
            if read_manifest(output) is None or set(planned) - set(read_manifest(output)["settings"]):
                sweep_folder.write_manifest(output, planned, options)
            log(f"sweep complete: {len(labels)} settings in {output}")
            return status
        plan = _Plan(output, labels, planned, options, task_list, margs, meta, gen, limit, opts.batch_size,
                     opts.device, bool(apply_chat_template), opts.use_cache, stop_at)
        with _plugin_lines(log, warn):
            _sweep(plan, todo, status, log, warn)
    log(f"sweep complete: {len(labels)} settings in {output}")
    return status


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What every setting of one sweep shares: the folder, the settings' labels (and every
    label the manifest plans), the options ``sweep.json`` records, and the run's tasks, model
    args, metadata, generation kwargs, limit, batch size, device, chat templating, whether
    answers are cached, and the label at which a test stops the sweep (``STOP_AT_ENV``)."""
    output: str
    labels: list
    planned: list
    options: dict
    task_list: list
    margs: dict
    meta: dict
    gen: object
    limit: object
    batch_size: object
    device: str
    chat: bool
    use_cache: bool
    stop_at: str | None


def _sweep(plan: _Plan, todo, status: dict, log, warn) -> None:
    """The settings ``todo`` ((config, label) pairs) of ``plan``, the model loaded once;
    each one's ``status`` set to ``done`` as it is published."""
    import lm_eval  # deferred, start-up: loads lm_eval
    from lm_eval.api.model import CacheHook  # deferred, start-up: loads jinja2, lm_eval, numpy, requests, tqdm, yaml
    # deferred, start-up: loads datasets, huggingface_hub, jinja2, lm_eval, numpy, pandas, requests, tqdm, yaml
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import make_table  # deferred, start-up: loads jinja2, lm_eval, numpy, requests, yaml

    # deferred, start-up: loads huggingface_hub, jinja2, lm_eval, numpy, requests, tokenizers, torch, tqdm, transformers, yaml
    from drift_eval.plugin.model import HFDriftLM

    # everything that can be checked without the weights, before they load
    task_manager = _task_manager(plan.task_list, {**plan.margs, **plan.meta})
    task_manager.load(plan.task_list)  # builds the docs: --metadata and the language-ID model are checked
    _check_model(plan.margs, plan.chat, log)
    t0 = time.perf_counter()
    log(f"loading {plan.margs['pretrained']} once for {len(todo)} setting(s)...")
    lm = HFDriftLM.create_from_arg_obj(dict(plan.margs), {"batch_size": plan.batch_size, "device": plan.device})
    log(f"model loaded in {time.perf_counter() - t0:.1f} s")
    sweep_folder.write_manifest(plan.output, plan.planned, plan.options)
    for c, lab in todo:
        i = plan.labels.index(lab) + 1
        folder = os.path.join(plan.output, c.folder())
        sweep_folder.clear(folder, log)
        cache = answer_cache.AnswerCache(os.path.join(folder, "cache"), warn=warn) if plan.use_cache else None
        before = len(cache) if cache is not None else 0
        log(f"[{i}/{len(plan.labels)}] {lab}: running {', '.join(plan.task_list)}"
            + (f" (resuming: {before} cache entries)" if before else ""))
        if lab == plan.stop_at:  # a test interrupts the sweep here: it stops until the test lets it go on
            os.kill(os.getpid(), signal.SIGSTOP)
        lm.set_compensation(c)
        answers = cached_serving.CachedServing(cache, plan.batch_size if isinstance(plan.batch_size, int) else 1)
        lm.set_cache_hook(answers)  # lm-eval's hook: its own request types stored as they are produced
        staging = os.path.join(folder, f"{sweep_folder.STAGING}{os.getpid()}")
        tracker = EvaluationTracker(output_path=staging)
        t1 = time.perf_counter()
        try:
            with cached_serving.serving(answers):  # the run's drift wrapper serves through the cache
                results = lm_eval.simple_evaluate(
                    model=lm, model_args={**plan.margs, **c.model_args()},
                    tasks=plan.task_list, batch_size=plan.batch_size, device=plan.device, limit=plan.limit,
                    gen_kwargs=plan.gen, log_samples=True, evaluation_tracker=tracker, apply_chat_template=plan.chat,
                    fewshot_as_multiturn=plan.chat, task_manager=task_manager)
            samples = results.pop("samples")
            tracker.save_results_aggregated(results=results, samples=samples)
            for task_name in results["configs"]:
                tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
            sweep_folder.publish(staging, folder)
        finally:
            lm.set_cache_hook(CacheHook(None))
            if cache is not None:
                cache.close()
        if cache is not None and cache.invalid:
            warn(f"{cache.path}: {cache.invalid} stored answer(s) were not valid answers and were generated again")
        log(make_table(results))
        if results.get("groups"):
            log(make_table(results, "groups"))
        log(f"[{i}/{len(plan.labels)}] {lab}: done in {time.perf_counter() - t1:.1f} s; requests answered by the "
            f"model: {answers.generated}, from the cache: {answers.cached}"
            + (f" (and {answers.turns_cached} conversation turns)" if answers.turns_cached else ""))
        status[lab] = "done"
