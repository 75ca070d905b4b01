"""Tables of published runs for the docs: a metric per setting of one task (``table``), and a
control task against its plain task, document by document with exact McNemar p (``pair``)."""
from __future__ import annotations

from drift_eval.decide.results import load_output
from drift_eval.errors import DriftUsageError


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
    from drift_eval.decide.compare import shared_documents  # deferred, start-up: loads numpy
    from drift_eval.metrics import paired  # deferred, start-up: loads numpy

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
        d = paired.paired_difference([a.per_sample[k] for k in docs], [b.per_sample[k] for k in docs],
                                     binary=a.binary if a.binary is not None else b.binary)
        lines.append(f"| {m} | {_fmt(a.value)} [{_fmt(a.lower, 2)}, {_fmt(a.upper, 2)}] | {_fmt(b.value)} "
                     f"[{_fmt(b.lower, 2)}, {_fmt(b.upper, 2)}] | {d.difference:+.3f} [{d.lower:+.2f}, "
                     f"{d.upper:+.2f}], p {d.p_value:.2g} ({d.test}, {d.n}) |")
    return "\n".join(lines)
