"""Does a change keep ``drift_french``'s samples? Run it on every backend that runs here, then
compare two such runs sample by sample.

    python benchmarks/same_samples.py run OUT [--limit 2] [--max-gen-toks 24]
    python benchmarks/same_samples.py compare BEFORE AFTER

``run`` calls the real ``lm_eval`` command on the bundled SmolLM2-135M-Instruct, greedy, for
``drift_french`` (the single-turn and eight-turn tasks):

* ``hf-drift`` under the committed settings ``none``, ``log:0.25`` and ``const:0.25``;
* lm-eval's ``hf``;
* ``hf`` and ``hf-drift`` (``log:0.25``) on a copy whose chat template has no system role
  (Gemma-style: it raises on a system turn);
* ``local-chat-completions`` against llama-cpp-python's server on 127.0.0.1 serving the
  bundled GGUF file (skipped with a note when the server package is not installed);

and every other kind of task once, on ``hf-drift`` (``compensation=none``), with the small
options the end-to-end tests use (``OTHER_KINDS``): α and perplexity (``drift_alpha_detail``,
``drift_ppl``), decodability (``drift_decode_detail``), ``position_bias``, ``accessibility``
and one target language of the family, single-turn and eight-turn (``drift_ja``).
``--only french`` or ``--only others`` runs one of the two parts.

``compare`` pairs the samples files of two ``run`` folders by backend and task and checks
that every sample has the same prompt, answers, hashes and per-sample metrics (a value
that only one side records, such as a metric added since, is listed, not counted as a
difference); it prints one line per file and exits 1 when any differs. Run ``run`` before a change (from a
checkout of the old code) and after it, then ``compare``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

from drift_eval.plugin.local_models import smollm2_dir, smollm2_gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from support.commands import TINY_OPTIONS  # noqa: E402
from support.models import NO_SYSTEM_TEMPLATE, model_with_template  # noqa: E402
from support.servers import LlamaServer  # noqa: E402

KEYS = ("doc_id", "arguments", "resps", "filtered_resps", "doc_hash", "prompt_hash", "target")
SETTINGS = (("none", "compensation=none"), ("log_0.25", "compensation=log,strength=0.25"),
            ("const_0.25", "compensation=const,strength=0.25"))


#: (folder, tasks, options): the other kinds of task, each with the options its end-to-end test runs
OTHER_KINDS = tuple((name, tasks, ["--metadata", json.dumps(TINY_OPTIONS[family])]) for name, tasks, family in (
    ("alpha", "drift_alpha_detail,drift_ppl", "drift_alpha"), ("decode", "drift_decode_detail", "drift_decode"),
    ("position_bias", "position_bias", "position_bias"), ("accessibility", "accessibility", "accessibility")))


def _generation(limit: int, max_gen_toks: int) -> list:
    return ["--apply_chat_template", "--limit", str(limit), "--gen_kwargs", f"max_gen_toks={max_gen_toks}"]


def _lm_eval(out: str, name: str, model: str, model_args: str, options: list, extra=(),
             tasks: str = "drift_french") -> None:
    """One ``lm_eval`` run into ``out/name``: ``tasks`` with ``options`` (the generation
    options, ``_generation``, or a study task's own)."""
    cmd = [sys.executable, "-m", "lm_eval", "--model", model, "--model_args", model_args, "--tasks", tasks,
           *options, "--log_samples", "--output_path", os.path.join(out, name), *extra]
    t0 = time.perf_counter()
    with open(os.path.join(out, f"{name}.log"), "w", encoding="utf-8") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    print(f"{name}: exit {rc} in {time.perf_counter() - t0:.0f} s", flush=True)
    if rc:
        raise SystemExit(f"{name} failed: see {os.path.join(out, name + '.log')}")


def run(out: str, limit: int, max_gen_toks: int, only: str | None = None) -> None:
    os.makedirs(out, exist_ok=True)
    model = smollm2_dir()
    hf = ("--device", "cpu", "--batch_size", "2")
    generation = _generation(limit, max_gen_toks)
    if only != "french":
        drift = f"pretrained={model},compensation=none"
        for name, tasks, options in OTHER_KINDS:
            _lm_eval(out, f"hf-drift_{name}", "hf-drift", drift, options, hf, tasks)
        _lm_eval(out, "hf-drift_drift_ja", "hf-drift", drift, generation, hf, "drift_ja")
    if only == "others":
        return
    for name, setting in SETTINGS:
        _lm_eval(out, f"hf-drift_{name}", "hf-drift", f"pretrained={model},{setting}", generation, hf)
    _lm_eval(out, "hf", "hf", f"pretrained={model}", generation, hf)
    no_system = model_with_template(model, os.path.join(out, "no_system_model"), NO_SYSTEM_TEMPLATE)
    _lm_eval(out, "hf_no-system", "hf", f"pretrained={no_system}", generation, hf)
    _lm_eval(out, "hf-drift_no-system", "hf-drift", f"pretrained={no_system},compensation=log,strength=0.25",
             generation, hf)
    try:
        # deferred, optional: llama-cpp-python[server]
        import llama_cpp.server  # noqa: F401
    except ImportError:
        print("local-chat-completions: skipped (llama-cpp-python[server] is not installed)")
        return
    folder, name = smollm2_gguf()
    with LlamaServer(os.path.join(folder, name), os.path.join(out, "server.log")) as server:
        _lm_eval(out, "local-chat-completions", "local-chat-completions",
                 f"model={server.alias},base_url={server.url},num_concurrent=1,max_retries=1", generation)


def _samples(root: str) -> dict:
    """(backend folder, task) -> samples of a ``run`` folder."""
    found = {}
    for path in glob.glob(os.path.join(glob.escape(root), "*", "*", "samples_*.jsonl")):
        backend = os.path.relpath(path, root).split(os.sep)[0]
        task = os.path.basename(path)[len("samples_"):].rsplit("_", 1)[0]
        with open(path, encoding="utf-8") as fh:
            found[(backend, task)] = [json.loads(line) for line in fh if line.strip()]
    return found


def compare(before: str, after: str) -> int:
    a, b = _samples(before), _samples(after)
    differing = 0
    for key in sorted(a.keys() | b.keys()):
        if key not in a or key not in b:
            print(f"only in {'after' if key not in a else 'before'}: {key[0]} {key[1]}")
            differing += 1
            continue
        diffs = []
        if len(a[key]) != len(b[key]):
            diffs.append(f"{len(a[key])} samples against {len(b[key])}")
        added, removed = set(), set()
        for x, y in zip(a[key], b[key]):
            fields = [k for k in KEYS if x.get(k) != y.get(k)]
            fields += [k for k in sorted(set(x) & set(y)) if k not in KEYS and k not in ("doc", "metrics")
                       and x.get(k) != y.get(k)]
            diffs += [f"doc {x.get('doc_id')}: {k}" for k in fields]
            added |= set(y) - set(x)
            removed |= set(x) - set(y)
        detail = f": {', '.join(diffs[:6])}" if diffs else ""
        new = "".join(f"; {what}: {', '.join(sorted(ks))}" for what, ks in (("new per-sample values", added),
                                                                         ("gone", removed)) if ks)
        print(f"{'DIFFERENT' if diffs else 'same'}: {key[0]} {key[1]} ({len(a[key])} samples){detail}{new}")
        differing += bool(diffs)
    print(f"{differing} of {len(a.keys() | b.keys())} samples files differ")
    return 1 if differing else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="drift_french on every backend that runs here, and every other kind of task")
    r.add_argument("out", help="new folder for the runs")
    r.add_argument("--limit", type=int, default=2)
    r.add_argument("--max-gen-toks", type=int, default=24)
    r.add_argument("--only", choices=("french", "others"),
                   help="drift_french on every backend, or the other kinds of task on hf-drift (default: both)")
    c = sub.add_parser("compare", help="two run folders, sample by sample")
    c.add_argument("before")
    c.add_argument("after")
    args = p.parse_args(argv)
    if args.command == "run":
        if os.path.exists(args.out) and not (os.path.isdir(args.out) and not os.listdir(args.out)):
            p.error(f"{args.out} exists and is not an empty folder: give a new folder")
        if args.limit < 1 or args.max_gen_toks < 1:
            p.error("--limit and --max-gen-toks must be whole numbers >= 1")
        run(os.path.abspath(args.out), args.limit, args.max_gen_toks, args.only)
        return 0
    for folder in (args.before, args.after):
        if not os.path.isdir(folder) or not _samples(folder):
            p.error(f"{folder} holds no samples: give a folder written by 'same_samples.py run'")
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
