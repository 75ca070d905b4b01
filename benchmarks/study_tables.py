"""Markdown tables of the prompt-forgetting study's free-generation and decomposition
figures, from the raw results (benchmarks/README.md quotes them):

* ``results/decode_smollm2_trained.json``, ``results/decode_smollm2_random_init.json``
  (``drift-eval decode ... --output``);
* ``results/alpha_decomposition.json`` (``benchmarks/alpha_decomposition.py``).

    python benchmarks/study_tables.py
"""
from __future__ import annotations

import os

from drift_eval.files import read_json

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = (("trained", "trained"), ("random_init", "random init"))
PUBLISHED = {"detail": "not decodable (text)", "paraphrase": "not decodable (text)", "genre": "not decodable (text)",
             "translation": "0.81 (Qwen2.5-0.5B), 0.84 (Pythia-160m)"}


def _f(v, d=3):
    return "—" if v is None else f"{v:.{d}f}"


def decode_tables() -> str:
    from drift_eval.measure.decode import summarise  # deferred, start-up: loads numpy, torch, tqdm

    out = []
    for key, name in MODELS:
        path = os.path.join(HERE, "results", f"decode_smollm2_{key}.json")
        if not os.path.isfile(path):
            continue
        res = read_json(path, "decode results")
        summary = summarise(res, sorted(res["scenes"]))
        if not summary:
            continue
        first = next(iter(summary.values()))
        ts = first["centres"]
        out.append(f"\n{name} ({first['scenes']} scenes, {first['predictions']} held-out predictions per cell): "
                   f"median layer by t, and at t = {ts[-1]} the median layer [95% Wilson], the best layer and the text\n")
        out.append("| axis | " + " | ".join(f"t={t}" for t in ts) + f" | t={ts[-1]}: median layer | best layer | text | "
                   "published (t = 512) |")
        out.append("|---|" + "---|" * len(ts) + "---|---|---|---|")
        for axis, r in summary.items():
            out.append(f"| {axis} | " + " | ".join(_f(v, 2) for v in r["hidden_accuracy_by_t"])
                       + f" | {_f(r['hidden_accuracy'])} [{_f(r['hidden_accuracy_lower'])}, "
                         f"{_f(r['hidden_accuracy_upper'])}] | {_f(r['hidden_accuracy_best'])} (layer {r['best_layer']}) "
                         f"| {_f(r['text_accuracy'])} [{_f(r['text_accuracy_lower'])}, {_f(r['text_accuracy_upper'])}] "
                         f"| {PUBLISHED[axis]} |")
        out.append("\nLanguage switches (trajectories whose majority fastText language is not the prompt's, per scene, "
                   f"of {first['switches_base']['of']}):\n")
        out.append("| prompt | mean | per scene | switched to |")
        out.append("|---|---|---|---|")
        sw = first["switches_base"]
        out.append(f"| base (English) | {sw['mean']:.1f} | {', '.join(map(str, sw['per_scene']))} | "
                   f"{_langs(sw['to'])} |")
        for axis, r in summary.items():
            sw = r["switches_variant"]
            out.append(f"| {axis} ({'/'.join(sw['prompt_languages'])}) | {sw['mean']:.1f} | "
                       f"{', '.join(map(str, sw['per_scene']))} | {_langs(sw['to'])} |")
    return "\n".join(out)


def _langs(to: dict, most: int = 5) -> str:
    items = list(to.items())
    text = ", ".join(f"{k} {v}" for k, v in items[:most])
    return (text + (", …" if len(items) > most else "")) or "none"


def decomposition_tables(every: int = 3) -> str:
    path = os.path.join(HERE, "results", "alpha_decomposition.json")
    if not os.path.isfile(path):
        return ""
    res = read_json(path, "decomposition results")
    out = []
    heads = []
    summaries = [(name, axis, s) for key, name in MODELS
                 for axis, s in ((res["runs"].get(key) or {}).get("summary") or {}).items()]
    for name, axis, s in summaries:
        d = s["decomposition"]
        m = d["medians"]
        heads.append(f"| {name} | {axis} | {s['scenes']} | {_f(s['alpha_median'])} | {_f(m['alpha_predicted'])} | "
                     f"{_f(d['max_abs_difference'])} | {_f(m['alpha_direct'])} | {_f(m['alpha_relay'])} | "
                     f"{_f(m['relay_share'], 2)} |")
    if heads:
        out.append("| model | axis | scenes | α measured (median) | α predicted (median) | max |gap| | α direct | "
                   "α relay | relay share |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        out += heads
    for name, axis, s in summaries:
        d = s["decomposition"]
        out.append(f"\n{name}, {axis}: layers 0, {every}, {2 * every}, … and the last\n")
        out.append("| layer | α measured | α predicted | difference ± se | α direct | α relay | α residual | "
                   "α MLP | relay share |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        n = len(d["alpha_measured"])
        for i in sorted(set(range(0, n, every)) | {n - 1}):
            a = d["alpha"]
            diff = d["difference"][i]
            se = d["difference_se"][i]
            out.append(f"| {i} | {_f(d['alpha_measured'][i], 2)} | {_f(d['alpha_predicted'][i], 2)} | "
                       f"{'—' if diff is None else f'{diff:+.2f}'} ± {_f(se, 2)} | {_f(a['direct'][i], 2)} | "
                       f"{_f(a['relay'][i], 2)} | {_f(a['residual'][i], 2)} | {_f(a['mlp'][i], 2)} | "
                       f"{_f(d['relay_share'][i], 2)} |")
    return "\n".join(out)


if __name__ == "__main__":
    print("$ python benchmarks/study_tables.py\n")
    print("## Free generation\n" + decode_tables())
    print("\n## Direct / relay decomposition\n\n" + decomposition_tables())
