"""Hand-made lm-eval output folders with known per-sample values, for the report, gate and
pytest-plugin tests. Same files and keys as lm-eval writes (results_<date>.json,
samples_<task>_<date>.jsonl), so the one loader reads them like real runs.

Known answers (``write_output``, one model, ``tiny`` by default):
* drift_french_single, 20 docs: ``none`` fully French on docs 0-9 (10/20), ``log:0.25`` on
  all 20 (ten 0 -> 1 flips: exact McNemar p = 2/1024, significant), ``const:0.25`` on docs
  0-11 (two flips: p = 0.5, not significant). ``french_shift`` moves every count down (a worse model).
  Language timelines of 4 segments: a French doc stays French; a drifted doc ``d`` leaves
  at segment ``d % 3`` (0-based), doc 10 at once.
* doc 10's ``none`` answer (a drifted one, shown as an excerpt and in the audit strip)
  carries ``<script>`` markup that must stay inert text.
* drift_french_multiturn (4 conversations): French rate per turn falls under ``none``.
* drift_alpha_detail: alpha_l00..alpha_l03; drift_ppl: perplexity 10 / 11 / 12.5
  (cost +10% and +25%); accessibility: unknown float metrics; position_bias: profiles.

``write_task_run`` writes one task of one model with given per-sample values (planted
regressions).
"""
import json
import os
from dataclasses import dataclass

from drift_eval.catalogue import STAMP
from drift_eval.tasks import _task_documents

INJECTED = "<script>document.title='PWNED';document.body.insertAdjacentHTML('beforeend','<b id=\"pwned\">x</b>')</script>"
SETTINGS = {
    "none": {"compensation": "none", "strength": 1.0, "french_docs": 10, "ppl": 10.0, "alpha": 0.9},
    "log:0.25": {"compensation": "log", "strength": 0.25, "french_docs": 20, "ppl": 11.0, "alpha": 0.5},
    "const:0.25": {"compensation": "const", "strength": 0.25, "french_docs": 12, "ppl": 12.5, "alpha": 0.7},
}
N_SINGLE = 20
N_CONV = 4


def _mean(xs):
    return sum(xs) / len(xs)


def _stderr(xs):
    n = len(xs)
    m = _mean(xs)
    return (sum((x - m) ** 2 for x in xs) / (n - 1) / n) ** 0.5 if n > 1 else 0.0


def _single_samples(label, french_docs):
    out = []
    for d in range(N_SINGLE):
        ff = 1.0 if d < french_docs else 0.0
        text = "Bonjour, voici la réponse en français. " * 3 if ff else "Hello, this answer drifted into English."
        onset = None if ff else (0 if d == 10 else d % 3)
        if label == "none" and d == 10:
            text = "Here is the answer " + INJECTED + " end."
        timeline = ["fr"] * 4 if onset is None else ["fr"] * onset + ["en"] * (4 - onset)
        out.append({"doc_id": d, "doc": {"id": f"req{d:02d}"}, "target": "", "resps": [[text]],
                    "filtered_resps": [text], "filter": "none", "doc_hash": f"hash-req{d:02d}",
                    "metrics": ["fully_french", "echo_rate", "french_fraction", "drift_score", "time_in_french",
                                "not_kept_left", "not_kept_degenerate", "not_kept_unreadable", "language_timeline",
                                "language_scores"],
                    "fully_french": ff, "french_fraction": ff, "echo_rate": 1.0 if (label == "none" and d == 19) else 0.0,
                    "drift_score": ff, "time_in_french": 1.0 if onset is None else onset / 4,
                    "not_kept_left": 1.0 - ff, "not_kept_degenerate": 0.0, "not_kept_unreadable": 0.0,
                    "language_timeline": timeline, "language_scores": [0.9 - 0.1 * k for k in range(4)]})
    return out


def _conv_samples(label):
    out = []
    for d in range(N_CONV):
        s = {"doc_id": d, "doc": {"id": f"conv{d}"}, "filter": "none", "doc_hash": f"hash-conv{d}"}
        turns = []
        for t in range(1, 9):
            fr = 0.0 if (label == "none" and t > 4 + d) else 1.0
            s[f"french_turn_{t}"] = fr
            turns.append(fr)
        s["all_turns_french"] = s["drift_score"] = float(all(turns))
        s["last3_french"] = _mean(turns[-3:])
        s["mean_words"] = 40.0 + d + (5 if label == "none" else 0)
        messages = [{"role": "system", "content": "Answer only in French."}]
        for t in range(1, 9):
            messages += [{"role": "user", "content": f"question {t}"},
                         {"role": "assistant", "content": f"Réponse {t} <i>en français</i>"}]
        s["resps"] = [[json.dumps(messages, ensure_ascii=False)]]
        s["filtered_resps"] = s["resps"][0]
        out.append(s)
    return out


def _task_block(name, samples, metrics):
    block = {"alias": name, "sample_len": len(samples)}
    for m in metrics:
        xs = [s[m] for s in samples]
        block[f"{m},none"] = _mean(xs)
        block[f"{m}_stderr,none"] = _stderr(xs)
    return block


def recorded_configs(names) -> dict:
    """The ``configs`` lm-eval writes for these tasks, as far as the loader reads them: each
    task's ``metric_list`` from its YAML (``report:`` hints included) and its metadata with
    the plugin's stamp (``drift_eval.plugin.task_base`` adds it at run time)."""
    docs = {doc["task"]: doc for _, _, doc in _task_documents() if isinstance(doc.get("task"), str)}
    return {t: {"task": t, "metric_list": docs[t]["metric_list"],
                "metadata": {**(docs[t].get("metadata") or {}), STAMP: "0.1.0"}} for t in names if t in docs}


def write_output(root, settings=("none", "log:0.25", "const:0.25"), date="2026-01-01T00-00-00.000000",
                 with_samples=True, model="tiny", french_shift=0):
    """Write the folder (for several models, call it once per model); returns its path."""
    os.makedirs(root, exist_ok=True)
    for label in settings:
        cfg = SETTINGS[label]
        folder = os.path.join(root, label.replace(":", "_"), f"__models__{model}")
        os.makedirs(folder, exist_ok=True)
        single = _single_samples(label, cfg["french_docs"] - french_shift)
        conv = _conv_samples(label)
        conv_metrics = [f"french_turn_{t}" for t in range(1, 9)] + ["all_turns_french", "last3_french",
                                                                    "mean_words", "drift_score"]
        results = {
            "drift_french_single": _task_block("drift_french_single", single,
                                               ["fully_french", "french_fraction", "echo_rate", "drift_score",
                                                "time_in_french", "not_kept_left", "not_kept_degenerate",
                                                "not_kept_unreadable"]),
            "drift_french_multiturn": _task_block("drift_french_multiturn", conv, conv_metrics),
            "drift_alpha_detail": {"alias": "drift_alpha_detail", "alpha,none": cfg["alpha"],
                                   "alpha_stderr,none": 0.05, "alpha_se,none": 0.05,
                                   **{f"alpha_l{i:02d},none": cfg["alpha"] + 0.1 * i for i in range(4)}},
            "drift_ppl": {"alias": "drift_ppl", "perplexity,none": cfg["ppl"], "perplexity_stderr,none": "N/A"},
            "accessibility": {"alias": "accessibility", "n50_m1,none": 12.0, "slope,none": -0.25,
                              "slope_stderr,none": 0.01},
            "position_bias": {"alias": "position_bias", "wasserstein_residual_aware,none": 0.2,
                              "profile_residual_aware,none": [0.5, 0.2, 0.2, 0.1],
                              "profile_attention_only,none": [0.97, 0.01, 0.01, 0.01],
                              "profile_abnar_zuidema,none": [0.8, 0.1, 0.05, 0.05],
                              "profile_gradient,none": [0.3, 0.3, 0.2, 0.2]},
        }
        all_scores = [s["drift_score"] for s in single] + [s["drift_score"] for s in conv]
        results["drift_french"] = {"alias": "drift_french", "drift_score,none": _mean(all_scores),
                                   "drift_score_stderr,none": _stderr(all_scores)}
        doc = {
            "results": results,
            "groups": {"drift_french": results["drift_french"]},
            "group_subtasks": {"drift_french": ["drift_french_single", "drift_french_multiturn"]},
            "configs": recorded_configs(t for t in results if t != "drift_french"),
            "higher_is_better": {"drift_french_single": {"fully_french": True, "echo_rate": False},
                                 "drift_french": {"drift_score": True}},
            "n-samples": {"drift_french_single": {"original": 36, "effective": N_SINGLE},
                          "drift_french_multiturn": {"original": 32, "effective": N_CONV},
                          **{t: {"original": 1, "effective": 1}
                             for t in ("drift_alpha_detail", "drift_ppl", "accessibility", "position_bias")}},
            "config": {"model": "hf-drift", "model_args": {"pretrained": f"/models/{model}",
                                                           "compensation": cfg["compensation"],
                                                           "strength": cfg["strength"]},
                       "model_revision": "main", "gen_kwargs": {"max_gen_toks": 64}, "random_seed": 0,
                       "numpy_seed": 1234, "torch_seed": 1234, "fewshot_seed": 1234},
            "lm_eval_version": "0.4.13", "git_hash": "abc1234", "date": 1767225600.0,
        }
        with open(os.path.join(folder, f"results_{date}.json"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        if with_samples:  # lm-eval logs every task; the measurement tasks' lines here carry no metric values
            measured = [{"doc_id": 0, "doc": {}, "target": "", "resps": [["{}"]], "filtered_resps": ["{}"],
                         "filter": "none"}]
            tasks = [("drift_french_single", single), ("drift_french_multiturn", conv)]
            tasks += [(t, measured) for t in ("drift_alpha_detail", "drift_ppl", "accessibility", "position_bias")]
            for task, samples in tasks:
                with open(os.path.join(folder, f"samples_{task}_{date}.jsonl"), "w", encoding="utf-8") as fh:
                    for s in samples:
                        fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    return str(root)


@dataclass(frozen=True)
class TaskRecord:
    """What ``write_task_run``'s results record of the task besides its values: its
    ``config`` (e.g. its generation kwargs; None: an empty one) and its ``version`` (as
    lm-eval records it; None: no version)."""
    config: dict | None = None
    version: object = None


def write_task_run(root, model, values, setting="none", task="drift_french_single", metric="fully_french",
                   date="2026-02-01T00-00-00.000000", record=TaskRecord()):
    """One run of one task whose per-sample ``metric`` values are ``values`` (doc i gets
    ``values[i]``), in ``root/<model>/``, with the task's config and version from ``record``;
    returns the folder."""
    task_config, version = record.config, record.version
    cfg = {lab: c for lab, c in SETTINGS.items()}[setting]
    folder = os.path.join(root, model)
    os.makedirs(folder, exist_ok=True)
    samples = [{"doc_id": i, "doc": {"id": f"req{i:02d}"}, "doc_hash": f"hash-req{i:02d}", "filter": "none",
                "resps": [["Bonjour." if v else "Hello."]], "filtered_resps": ["Bonjour." if v else "Hello."],
                metric: float(v)} for i, v in enumerate(values)]
    doc = {"results": {task: _task_block(task, samples, [metric])},
           "configs": {task: task_config or {}}, "higher_is_better": {task: {metric: True}},
           "n-samples": {task: {"original": len(values), "effective": len(values)}},
           "config": {"model": "hf-drift", "model_args": {"pretrained": f"/models/{model}",
                                                          "compensation": cfg["compensation"],
                                                          "strength": cfg["strength"]}}}
    if version is not None:
        doc["versions"] = {task: version}
    with open(os.path.join(folder, f"results_{date}.json"), "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    with open(os.path.join(folder, f"samples_{task}_{date}.jsonl"), "w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s) + "\n")
    return folder
