"""The behavioural runs at the protocol's own size: publish them and tabulate them.

The runs themselves are ``drift-eval sweep`` commands (resumable; docs/results/README.md
lists them with their wall-clock times). This script does the two steps after:

    python benchmarks/protocol_runs.py publish RUN_FOLDER docs/results/NAME
        copies every results file, and every samples file with its answers cut to an
        excerpt (a conversation: each assistant turn; a teacher-forced request: each of its
        continuations; prompts, generation options, per-sample metrics and language timelines
        kept whole, so the report, its provenance and the paired tests can be rebuilt from
        what is committed);
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

and one before: ``python benchmarks/protocol_runs.py twin NEW_FOLDER [--model DIR]`` writes
the untrained twin of DIR (default: the bundled SmolLM2-135M-Instruct), the same weights as
``drift-eval alpha --random-init``, as a model folder that a sweep loads with
``--model-args pretrained=NEW_FOLDER``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys

from drift_eval.plugin import answer_cache
from drift_eval.decide.results import load_output
from drift_eval.errors import DriftUsageError
from drift_eval.files import read_jsonl, write_text_atomic

EXCERPT = 1200  # characters of each answer kept: the start, where compliance shows first
TURN_EXCERPT = 600  # characters of each assistant turn of a conversation


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


def _conversation(text: str):
    """A conversation sample's answer is its message list as JSON text; None otherwise."""
    msgs = _json(text, "[{")
    ok = isinstance(msgs, list) and all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs)
    return msgs if ok else None


def _cut(resps):
    """Answers cut to an excerpt; a conversation stays valid JSON, each assistant turn cut."""
    if isinstance(resps, str):
        msgs = _conversation(resps)
        if msgs is None:
            return _cut_text(resps, EXCERPT)
        return json.dumps([{**m, "content": _cut_text(str(m["content"]), TURN_EXCERPT)} if m["role"] == "assistant"
                           else m for m in msgs], ensure_ascii=False)
    if isinstance(resps, list):
        return [_cut(r) for r in resps]
    return resps


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
                r["resps"] = _cut(r.get("resps"))
                r["filtered_resps"] = _cut(r.get("filtered_resps"))
                r["arguments"] = _cut_request(r.get("arguments"))
            write_text_atomic(target, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        else:
            shutil.copyfile(path, target)
        print(target)


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


def _fmt(v, digits=3):
    return "—" if not isinstance(v, (int, float)) or v != v else f"{v:.{digits}f}"


def table(folders, task: str, metrics: list[str]) -> str:
    out = load_output(*folders, allow_partial=True)
    lines = ["| setting | " + " | ".join(f"{m} [95%]" for m in metrics) + " | " +
             " | ".join(f"Δ {m} vs none [95%], p" for m in metrics[:2]) + " |",
             "|---|" + "---|" * (len(metrics) + min(2, len(metrics)))]
    for run in out.ordered_runs():
        if task not in run.tasks:
            continue
        cells = []
        for m in metrics:
            if m not in run.tasks[task].values:
                cells.append("—")
                continue
            x = out.metric(task, m, run.setting, run.model)
            cells.append(f"{_fmt(x.value)} [{_fmt(x.lower, 2)}, {_fmt(x.upper, 2)}]")
        for m in metrics[:2]:
            d = None
            if run.setting != "none" and m in run.tasks[task].values:
                try:
                    d = out.compare(task, m, run.setting, "none", run.model)
                except DriftUsageError as exc:  # a setting without a none run beside it
                    print(f"note: {run.setting} {m}: {exc}")
            cells.append("—" if d is None else
                         f"{d.difference:+.3f} [{d.lower:+.2f}, {d.upper:+.2f}], p {d.p_value:.2g}")
        lines.append(f"| {run.setting} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pair(folder: str, task: str, base_folder: str, base_task: str, metrics: list[str],
         setting: str = "none") -> str:
    """Paired differences ``task − base_task`` per metric, on the documents both logged
    (matched by ``doc_id``: the tasks share their documents' order)."""
    from drift_eval.decide.compare import shared_documents
    from drift_eval.metrics import stats

    runs = []
    for f, t in ((folder, task), (base_folder, base_task)):
        out = load_output(f, allow_partial=True)
        found = [r for r in out.ordered_runs() if r.setting == setting and t in r.tasks]
        if len(found) != 1:
            raise DriftUsageError(f"{f} has {len(found)} runs of {t} under {setting}; give a folder with exactly one")
        runs.append((out, t, found[0].model))
    lines = [f"| metric | {task} [95%] | {base_task} [95%] | Δ [95%], p (test, n) |", "|---|---|---|---|"]
    for m in metrics:
        names = m.split("=", 1) if "=" in m else [m, m]
        (a, b) = [out.metric(t, name, setting, model) for (out, t, model), name in zip(runs, names)]
        if not a.per_sample or not b.per_sample:
            raise DriftUsageError(f"{m} has no per-sample values in both runs (are the samples logged?)")
        docs = shared_documents(a, b, same_hash=False)  # the control's documents differ from the plain task's
        d = stats.paired_difference([a.per_sample[k] for k in docs], [b.per_sample[k] for k in docs])
        lines.append(f"| {m} | {_fmt(a.value)} [{_fmt(a.lower, 2)}, {_fmt(a.upper, 2)}] | {_fmt(b.value)} "
                     f"[{_fmt(b.lower, 2)}, {_fmt(b.upper, 2)}] | {d.difference:+.3f} [{d.lower:+.2f}, "
                     f"{d.upper:+.2f}], p {d.p_value:.2g} ({d.test}, {d.n}) |")
    return "\n".join(lines)


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
    w = sub.add_parser("twin")
    w.add_argument("dest")
    w.add_argument("--model", help="model folder (default: the bundled SmolLM2-135M-Instruct)")
    args = ap.parse_args()
    try:
        if args.cmd == "twin":
            from drift_eval.plugin.local_models import save_untrained_twin, smollm2_dir

            print(save_untrained_twin(args.model or smollm2_dir(), args.dest))
        elif args.cmd == "publish":
            publish(args.src, args.dest)
        elif args.cmd == "pair":
            print(pair(args.folder, args.task, args.base_folder, args.base_task,
                       [m for m in args.metrics.split(",") if m], args.setting))
        elif args.cmd == "checkpoint":
            checkpoint(args.run, args.dest)
        elif args.cmd == "restore":
            restore(args.src, args.run)
        else:
            print(table(args.folders, args.task, [m for m in args.metrics.split(",") if m]))
    except DriftUsageError as exc:  # unusable input: one line, exit 2
        print(f"protocol_runs {args.cmd}: error: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
