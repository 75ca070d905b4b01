"""Eight-turn conversations on SmolLM2-135M-Instruct, each turn re-encoded
(``conversation_cache=off``) against each conversation carrying its keys and values between
turns (``conversation_cache=on``): the whole run's time, the seconds of each turn, and
whether the answers are the same, token for token.

Each run is a fresh process (``--one off|on``), so that neither mode inherits the other's
warm allocator; the rounds alternate which mode goes first. Answers are greedy and
unforced (each turn ends where the model ends it, at most ``--tokens`` tokens), the
conversations those of ``drift_french_multiturn``, all in one batch. Times are wall-clock
and process CPU time, one torch thread.

    python benchmarks/conversation_cache.py [--conversations 8] [--turns 8] [--tokens 512] [--rounds 2]
        [--out FILE] [--work DIR]

Each finished run is kept in ``--work`` (default: the output's name with ``.runs``), so a
run that was stopped resumes where it stopped; the settings are kept with the runs and a
folder made under other settings is refused.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from drift_eval.conversation import ConversationSpec, assistant_replies
from drift_eval.files import read_json, write_json_atomic
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.plugin.request_types import CONVERSATION
from drift_eval.taskdata.french import read_conversations, system_prompt

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("off", "on")


def one(mode: str, args) -> dict:
    """One run in this process: per turn (wall s, CPU s), the whole run, the answers."""
    import torch  # deferred, start-up: loads numpy, torch, tqdm
    from lm_eval.api.instance import Instance  # deferred, start-up: loads lm_eval

    # deferred, start-up: loads huggingface_hub, jinja2, lm_eval, numpy, requests, tokenizers, torch, tqdm, transformers, yaml
    from drift_eval.plugin.model import HFDriftLM

    torch.set_num_threads(1)
    system = system_prompt("en")
    specs = [ConversationSpec(system, c["user_turns"][: args.turns]) for c in read_conversations()[: args.conversations]]
    gen = {"until": [], "max_gen_toks": args.tokens, "do_sample": False}
    lm = HFDriftLM(pretrained=smollm2_dir(), device="cpu", batch_size=len(specs), conversation_cache=mode,
                   compensation=args.compensation, strength=args.strength)
    turns = []
    original = lm.generate_until

    def timed(requests, disable_tqdm=False):  # one call per turn
        wall, cpu = time.perf_counter(), time.process_time()
        out = original(requests, disable_tqdm=disable_tqdm)
        turns.append({"wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3),
                      "answer_tokens": [a.meta.get("tokens") for a in out]})
        return out

    lm.generate_until = timed  # this run's own model object
    requests = [Instance(CONVERSATION.name, {"system_prompt": system}, (s.to_json(), dict(gen)), 0) for s in specs]
    wall, cpu = time.perf_counter(), time.process_time()
    out = lm.generate_conversation(requests, disable_tqdm=True)
    whole = {"wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3)}
    return {"mode": mode, "whole": whole, "turns": turns, "answers": [assistant_replies(o) for o in out],
            "re_encoded_turns": sum(o.count('"cache_reused": false') for o in out)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--compensation", default="none")
    ap.add_argument("--strength", type=float, default=1.0)
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "conversation_cache.json"))
    ap.add_argument("--work", help="folder of finished runs (default: OUT with .runs)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args)))
        return
    keys = ("conversations", "turns", "tokens", "compensation", "strength")
    settings = {k: getattr(args, k) for k in keys}
    work = args.work or os.path.splitext(args.out)[0] + ".runs"
    if os.path.exists(work) and not os.path.isdir(work):
        sys.exit(f"--work {work} is not a folder")
    os.makedirs(work, exist_ok=True)
    kept = os.path.join(work, "settings.json")
    if os.path.exists(kept) and read_json(kept, "settings file", expect=dict) != settings:
        sys.exit(f"{work} holds runs made with other settings ({kept}); give another --work")
    write_json_atomic(kept, settings)
    passed = [f"--{k}={getattr(args, k)}" for k in keys]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    runs = {m: [] for m in MODES}
    for r in range(args.rounds):
        for mode in (MODES if r % 2 == 0 else MODES[::-1]):
            path = os.path.join(work, f"round{r + 1}_{mode}.json")
            if os.path.exists(path):
                run = read_json(path, "finished run", expect=dict)
            else:
                done = subprocess.run([sys.executable, __file__, "--one", mode, *passed], env=env, check=True,
                                      capture_output=True, text=True)
                run = json.loads(done.stdout.strip().splitlines()[-1])
                write_json_atomic(path, run)
            runs[mode].append(run)
            print(f"round {r + 1} {mode}: {run['whole']}", file=sys.stderr)
    median = {m: {k: statistics.median(run["whole"][k] for run in runs[m]) for k in ("wall_s", "cpu_s")} for m in MODES}
    per_turn = {clock: {m: [round(statistics.median(run["turns"][t][clock] for run in runs[m]), 3)
                            for t in range(len(runs[m][0]["turns"]))] for m in MODES} for clock in ("wall_s", "cpu_s")}
    answers = [run["answers"] for m in MODES for run in runs[m]]
    res = {
        "whole_run_s": median,
        "ratio_off_vs_on": {k: round(median["off"][k] / median["on"][k], 2) for k in ("wall_s", "cpu_s")},
        "seconds_per_turn": per_turn,
        "runs": {m: [run["whole"] for run in runs[m]] for m in MODES},
        "answer_tokens_per_turn": [run["answer_tokens"] for run in runs["off"][0]["turns"]],
        "same_answers": all(a == answers[0] for a in answers),
        "re_encoded_turns_on": [run["re_encoded_turns"] for run in runs["on"]],
    }
    meta = {k: getattr(args, k) for k in ("conversations", "turns", "tokens", "rounds", "compensation", "strength")}
    meta |= {"model": "SmolLM2-135M-Instruct (float32, CPU)", "threads": 1, "batch": "all conversations",
             "out": os.path.relpath(os.path.abspath(args.out), os.path.dirname(HERE))}  # no machine path
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write_json_atomic(args.out, {"meta": meta, "results": res}, indent=2)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
