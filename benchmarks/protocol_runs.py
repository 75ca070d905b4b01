"""The behavioural runs at the protocol's own size: publish them and tabulate them.

The runs themselves are ``drift-eval sweep`` commands (resumable; docs/results/README.md
lists them with their wall-clock times). This script does the two steps after:

    python benchmarks/protocol_runs.py publish RUN_FOLDER docs/results/NAME
        copies every results file, and every samples file with its generated answers whole
        (single-turn answers and every turn of a conversation, so a published run can be
        scored again when a definition changes) and each teacher-forced request's
        continuations cut to an excerpt (they are the task's bundled data, named by the
        excerpt and ``prompt_hash``); prompts, generation options, per-sample metrics and
        language timelines kept whole;
    python benchmarks/protocol_runs.py table docs/results/NAME [...] [--task T --metrics a,b]
        prints a Markdown table per setting: each metric with its 95% interval, and the
        paired difference against ``none`` (interval, p, test) on the same documents;
    python benchmarks/protocol_runs.py pair FOLDER TASK BASE_FOLDER BASE_TASK --metrics a,b
        the same paired differences between two tasks run on the same conversations (a
        control against the plain task), document by document (``doc_id``); ``a=b`` pairs
        metric ``a`` of TASK with metric ``b`` of BASE_TASK.

and, for a run that outlives the machine it started on:

    python benchmarks/protocol_runs.py checkpoint RUN_FOLDER docs/results/checkpoints/NAME
        writes each setting's answer cache as JSON lines (NAME/<setting>.jsonl; it may run
        while the sweep is writing the cache);
    python benchmarks/protocol_runs.py restore docs/results/checkpoints/NAME RUN_FOLDER
        puts them back into RUN_FOLDER/<setting>/cache/, every answer checked first; the
        same sweep command then resumes at its first missing answer.

and, to score a published run again when a definition changes:

    python benchmarks/protocol_runs.py replay docs/results/NAME RUN_FOLDER [--model-args ARGS]
        puts every published answer into RUN_FOLDER's answer cache; the run's own sweep
        command with ``--output RUN_FOLDER`` then scores them with today's tasks in real
        lm-eval, generating nothing but the forcing check;

    python benchmarks/protocol_runs.py rescore docs/results/NAME [--model-args ARGS]
        all of it in place: replay, the run's own sweep command (its ``sweep.json``), publish;

and one before: ``python benchmarks/protocol_runs.py twin NEW_FOLDER [--model DIR]`` writes
the untrained twin of DIR (default: the bundled SmolLM2-135M-Instruct), the same weights as
``drift-eval alpha --random-init``, as a model folder that a sweep loads with
``--model-args pretrained=NEW_FOLDER``.

Published files name no folder of the machine that made them. ``publish`` ends with the
step that ``relabel`` runs on its own:

    python benchmarks/protocol_runs.py relabel PATH... [--gguf FILE.gguf ...]
        rewrites, in every ``*.json`` and ``*.jsonl`` file under PATH, each path on the machine
        that wrote it into its portable form (docs/results/README.md, "Names and paths"):
        a converted GGUF folder as ``$DRIFT_CACHE_DIR/gguf/<file name>-<content key>``, the
        key computed again from the GGUF file where it is at hand (the bundled SmolLM2, and
        each ``--gguf``); a file of this repository as its path in it (``tasks/...``); a
        file of an installed package as ``$SITE_PACKAGES/<package>/...``; any other model
        folder as ``$MODELS/<folder name>``. Only those string values change:
        every other byte of each file stays as it was. Then each model folder is renamed to
        the model's readable name, as ``drift-eval sweep`` now names it. A path it has no
        portable form for stops it with one line, before anything is written.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile

from drift_eval.errors import DriftUsageError
from drift_eval.files import atomic_open, read_jsonl, write_text_atomic
from drift_eval.plugin import answer_cache
from drift_eval.resultfiles.manifest import read_manifest

from paired_tables import pair, table  # beside this script
from drift_eval.plugin.local_models import save_untrained_twin, smollm2_dir
from drift_eval.plugin.sweep import SweepOptions, run_sweep
from portable_names import relabel


TURN_EXCERPT = 600  # characters of each teacher-forced continuation kept


def _cut_text(text: str, keep: int) -> str:
    return text if len(text) <= keep else text[:keep] + f" [... {len(text) - keep} more characters]"


def _json(text, opener: str):
    """``text`` parsed as JSON when it is a string that starts with ``opener``; None otherwise."""
    if not isinstance(text, str) or not text.startswith(opener):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _cut_request(args):
    """A teacher-forced request (``drift_alpha``, ``drift_ppl``) carries its continuations as
    JSON text in ``arg_0`` (about 100 kB a scene); each is cut to an excerpt, the rest kept.
    The continuations are the task's bundled data, so the excerpt and ``prompt_hash`` name them."""
    if not isinstance(args, dict):
        return args
    out = {}
    for name, gen in args.items():
        spec = _json(gen.get("arg_0"), "{") if isinstance(gen, dict) else None
        conts = spec.get("continuations") if isinstance(spec, dict) else None
        if isinstance(conts, list) and all(isinstance(c, str) for c in conts):
            spec["continuations"] = [_cut_text(c, TURN_EXCERPT) for c in conts]
            gen = {**gen, "arg_0": json.dumps(spec, ensure_ascii=False)}
        out[name] = gen
    return out


def publish(src: str, dest: str) -> None:
    for path in sorted(glob.glob(os.path.join(src, "**", "*.json*"), recursive=True)):
        rel = os.path.relpath(path, src)
        if "/cache/" in f"/{rel}" or ".partial" in rel or rel.endswith(".damaged"):
            continue
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        name = os.path.basename(path)
        if name.startswith("samples_") and name.endswith(".jsonl"):
            rows = read_jsonl(path, "samples file")
            for r in rows:
                r["arguments"] = _cut_request(r.get("arguments"))
            write_text_atomic(target, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        else:
            with open(path, "rb") as src_fh, atomic_open(target, "wb") as fh:
                shutil.copyfileobj(src_fh, fh)
        print(target)
    relabel([dest])


def checkpoint(run: str, dest: str) -> None:
    found = sorted(glob.glob(os.path.join(run, "*", "cache", answer_cache.FILE)))
    if not found:
        raise DriftUsageError(f"{run} holds no answer cache (<setting>/cache/{answer_cache.FILE}): is it a sweep's "
                              f"output folder?")
    for path in found:
        setting = os.path.basename(os.path.dirname(os.path.dirname(path)))
        rows = answer_cache.export_rows(os.path.dirname(path))
        target = write_text_atomic(os.path.join(dest, f"{setting}.jsonl"),
                                   "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        print(f"{target}: {len(rows)} answers")


def restore(src: str, run: str) -> None:
    files = sorted(glob.glob(os.path.join(src, "*.jsonl")))
    if not files:
        raise DriftUsageError(f"{src} holds no checkpoint (<setting>.jsonl files)")
    checked = [(f, answer_cache.check_rows(read_jsonl(f, "checkpoint", required=("key", "type", "answer"),
                                                      line_ends=True), f)) for f in files]
    for f, items in checked:  # every file read and checked whole before anything is stored
        setting = os.path.basename(f)[:-len(".jsonl")]
        n = answer_cache.import_items(os.path.join(run, setting, "cache"), items)
        print(f"{os.path.join(run, setting, 'cache', answer_cache.FILE)}: {n} answers from {f}")


def _cached_answer(sample: dict, tokenizer):
    """(request type, args, answer as the cache stores it) of one published sample: a
    conversation's logged messages as they are; a single-turn answer as an ``Answer`` record
    with what the backend reported (its token count, forced length, placement and where it
    wanted to end). The published sample does not hold where that end falls in the text:
    ``tokenizer`` (the model's) cuts the answer's own tokens there, as the model did."""
    args = sample["arguments"]["gen_args_0"]
    spec = _json(args.get("arg_0"), "{")
    text = sample["resps"][0][0]
    if isinstance(spec, dict) and "user_turns" in spec:
        return "generate_conversation", (args["arg_0"], args["arg_1"]), text
    meta = {"instruction_placement": sample["instruction_placement"]} if sample.get("instruction_placement") else {}
    if isinstance(sample.get("answer_tokens"), (int, float)):
        meta["tokens"] = int(sample["answer_tokens"])
    if sample.get("forced_length") == 1.0:
        meta["forced_length"] = True
        if sample.get("natural_end_observed") == 1.0:
            end = sample.get("natural_end")
            meta["natural_end"] = None if end is None else int(end)
            meta["natural_end_chars"] = None if end is None else len(
                tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"][:int(end)]))
    return "generate_until", (args["arg_0"], args["arg_1"]), {"answer": {"text": text, **meta}}


def replay(published: str, run: str, model_args: str = "") -> None:
    """Every answer of a published run into the answer cache of a sweep output folder
    ``run`` (``run/<setting>/cache/``), each checked first: the sweep command that made the
    run, given ``--output run``, then scores every answer again with today's tasks, in real
    lm-eval, without generating (the forcing check before a forced run still generates one
    short answer). ``model_args``: the sweep's ``--model-args`` (default: the bundled
    SmolLM2-135M-Instruct); the model is loaded once, because a single-turn answer is cached
    under its request as the backend takes it (the forced length under the backend's own
    name, with the model's end-of-turn ids), which the drift wrapper prepares here as in
    the run, and its tokenizer cuts where an answer wanted to end."""
    from lm_eval.api.instance import Instance  # deferred, start-up: loads lm_eval
    from lm_eval.api.model import hash_args  # deferred, start-up: loads jinja2, lm_eval, numpy, requests, tqdm, yaml
    # deferred, start-up: loads jinja2, lm_eval, numpy, requests, yaml
    from lm_eval.utils import simple_parse_args_string

    # deferred, start-up: loads huggingface_hub, jinja2, lm_eval, numpy, requests, tokenizers, torch, tqdm, transformers, yaml
    from drift_eval.plugin.model import HFDriftLM
    from drift_eval.plugin.wrapper import DriftLM  # deferred, start-up: loads jinja2, lm_eval, numpy, requests, yaml

    found = sorted(glob.glob(os.path.join(published, "*", "*", "samples_*.jsonl")))
    if not found:
        raise DriftUsageError(f"{published} holds no published samples (<setting>/<model>/samples_*.jsonl)")
    margs = {"pretrained": smollm2_dir(), **simple_parse_args_string(model_args or "")}
    margs.pop("conversation_cache", None)
    lm = HFDriftLM.create_from_arg_obj(margs, {"batch_size": 1, "device": "cpu"})
    by_setting: dict = {}
    for path in found:
        setting = os.path.relpath(path, published).split(os.sep)[0]
        task = os.path.basename(path)[len("samples_"):].rsplit("_", 1)[0]
        rows = by_setting.setdefault(setting, [])
        wrapper = DriftLM(lm, [task])
        for sample in read_jsonl(path, "samples file"):
            rtype, args, answer = _cached_answer(sample, lm.tokenizer)
            if rtype == "generate_until":
                request = Instance("generate_until", sample["doc"], args, 0, (task, sample["doc_id"], 1))
                [request], _ = wrapper._prepared([request])  # the request as the backend takes it
                args = request.args
            rows.append({"key": hash_args(rtype, args), "type": rtype, "answer": answer})
    checked = {setting: answer_cache.check_rows(rows, published) for setting, rows in by_setting.items()}
    for setting, items in checked.items():  # every answer checked before anything is stored
        n = answer_cache.import_items(os.path.join(run, setting, "cache"), items)
        print(f"{os.path.join(run, setting, 'cache', answer_cache.FILE)}: {n} answers from {published}")


def rescore(published: str, model_args: str = "", batch_size: int = 36) -> None:
    """Score a published run again with today's tasks, in place: its answers go into a fresh
    sweep folder's answer cache (``replay``), its own sweep command (``sweep.json``'s options)
    runs there in real lm-eval without generating, and the new results and samples replace
    the published ones (``publish``). ``model_args`` overrides the published model (its
    ``pretrained`` and ``gguf_file``: the published names are portable, not paths here);
    default: the bundled SmolLM2-135M-Instruct. The run's wall-clock stays the one of the run
    that made the answers (``run.json``)."""
    # deferred, start-up: loads jinja2, lm_eval, numpy, requests, yaml
    from lm_eval.utils import simple_parse_args_string

    manifest = read_manifest(published)
    if manifest is None:
        raise DriftUsageError(f"{published} holds no sweep.json: it is not a published sweep")
    options = manifest.get("options") or {}
    margs = {**{k: str(v) for k, v in (options.get("model_args") or {}).items()},
             "pretrained": smollm2_dir(), **simple_parse_args_string(model_args or "")}
    if "gguf_file" in margs and not model_args:
        raise DriftUsageError(f"{published} was run on a GGUF file ({margs['gguf_file']}): give --model-args "
                              f"pretrained=DIR,gguf_file=FILE")
    wall = _seconds_of(published)
    with tempfile.TemporaryDirectory(prefix="rescore-") as work:
        run, fresh = os.path.join(work, "run"), os.path.join(work, "published")
        replay(published, run, ",".join(f"{k}={v}" for k, v in margs.items()))
        limit = options.get("limit")
        run_sweep(run, ",".join(manifest["settings"]), ",".join(options.get("tasks") or manifest["tasks"]),
                  SweepOptions(model_args=",".join(f"{k}={v}" for k, v in margs.items()),
                               limit=int(limit) if isinstance(limit, (int, float)) else None,
                               gen_kwargs=options.get("gen_kwargs") or "", batch_size=batch_size,
                               apply_chat_template=bool(options.get("apply_chat_template", True)),
                               metadata=json.dumps(options["metadata"]) if options.get("metadata") else "",
                               span=options.get("span") or "system"))
        publish(run, fresh)
        for name in os.listdir(published):  # the old files go only once the new ones are all there
            if name != "run.json":
                path = os.path.join(published, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        for name in os.listdir(fresh):
            shutil.move(os.path.join(fresh, name), os.path.join(published, name))
    if wall is not None and not os.path.exists(os.path.join(published, "run.json")):
        write_text_atomic(os.path.join(published, "run.json"), json.dumps({"wall_clock_s": wall}) + "\n")
    print(f"{published}: scored again with today's tasks")


def _seconds_of(published: str) -> float | None:
    """The wall-clock of the run that made a published run's answers: its ``run.json``, else
    the sum of its results files' ``total_evaluation_time_seconds``."""
    note = os.path.join(published, "run.json")
    if os.path.isfile(note):
        return None  # already recorded
    total = 0.0
    for path in glob.glob(os.path.join(published, "*", "*", "results_*.json")):
        with open(path, encoding="utf-8") as fh:
            total += float(json.load(fh).get("total_evaluation_time_seconds") or 0.0)
    return total or None


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("publish")
    p.add_argument("src")
    p.add_argument("dest")
    t = sub.add_parser("table")
    t.add_argument("folders", nargs="+")
    t.add_argument("--task", default="drift_french_single")
    t.add_argument("--metrics", default="fully_french,drift_given_start,starts_french,degenerate_share,lcb_lpr,"
                                        "fully_french_before_end,natural_end_share")
    q = sub.add_parser("pair")
    q.add_argument("folder")
    q.add_argument("task")
    q.add_argument("base_folder")
    q.add_argument("base_task")
    q.add_argument("--metrics", required=True)
    q.add_argument("--setting", default="none")
    c = sub.add_parser("checkpoint")
    c.add_argument("run")
    c.add_argument("dest")
    r = sub.add_parser("restore")
    r.add_argument("src")
    r.add_argument("run")
    lb = sub.add_parser("relabel")
    lb.add_argument("paths", nargs="+")
    lb.add_argument("--gguf", action="append", default=[], help="a GGUF file whose converted folders to key "
                                                                "by content (repeatable; the bundled SmolLM2 always)")
    y = sub.add_parser("replay")
    y.add_argument("published")
    y.add_argument("run")
    y.add_argument("--model-args", default="", help="the sweep's --model-args (default: the bundled SmolLM2)")
    z = sub.add_parser("rescore")
    z.add_argument("published")
    z.add_argument("--model-args", default="", help="pretrained=DIR[,gguf_file=F] (default: the bundled SmolLM2)")
    z.add_argument("--batch-size", type=int, default=36)
    w = sub.add_parser("twin")
    w.add_argument("dest")
    w.add_argument("--model", help="model folder (default: the bundled SmolLM2-135M-Instruct)")
    args = ap.parse_args()
    try:
        if args.cmd == "twin":
            print(save_untrained_twin(args.model or smollm2_dir(), args.dest))
        elif args.cmd == "publish":
            publish(args.src, args.dest)
        elif args.cmd == "relabel":
            relabel(args.paths, args.gguf)
        elif args.cmd == "pair":
            print(pair(args.folder, args.task, args.base_folder, args.base_task,
                       [m for m in args.metrics.split(",") if m], args.setting))
        elif args.cmd == "checkpoint":
            checkpoint(args.run, args.dest)
        elif args.cmd == "restore":
            restore(args.src, args.run)
        elif args.cmd == "rescore":
            rescore(args.published, args.model_args, args.batch_size)
        elif args.cmd == "replay":
            replay(args.published, args.run, args.model_args)
        else:
            print(table(args.folders, args.task, [m for m in args.metrics.split(",") if m]))
    except DriftUsageError as exc:  # unusable input: one line, exit 2
        print(f"protocol_runs {args.cmd}: error: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
