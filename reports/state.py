"""What the report's sections share: ``Report`` holds the results, the task catalogue, the
optional gate outcome and baseline, the comparisons (computed once, read by every section
that shows them), the plots and the records of every number shown (the JSON and CSV
exports)."""
from __future__ import annotations

import dataclasses
import math
import re

from drift_eval.catalogue import headline, label
from drift_eval.decide.compare import compare_metric, compare_models, compared_metrics, shared_documents
from drift_eval.decide.gate import gate, resolve_baseline
from drift_eval.errors import DriftUsageError
from drift_eval.metrics import paired, power
from drift_eval.reports.svg import PALETTE, Style, line_plot
from drift_eval.tasks import task_info


def finite(v) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def number(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _clean(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "plot"


ARROWS = {True: "↑", False: "↓"}

#: small multiples: a panel's width and its legend column (setting names are short)
PANEL_WIDTH = 560
PANEL_LEGEND_PX = 100
#: series names longer than this go in a legend below the plot
LONG_NAME = 15


class Report:
    """What the sections share: the results, the catalogue (``cat``: metric names, roles and
    directions as the runs recorded them, ``Output.catalogue``; ``tasks``: each task's family
    and dataset options, from the task YAMLs), the
    optional policy outcome and baseline, and the records of every number shown."""

    def __init__(self, output, policy: str | None = None, baseline: str | None = None):
        self.output = output
        self.cat = output.catalogue
        self.tasks = task_info()
        self.records = []
        self.plots = []
        self.several = len(output.models) > 1
        self.outcomes = None
        base = baseline
        candidate, model_only = None, False
        if policy:
            self.outcomes, pol = gate(output, policy, baseline)
            base, candidate, model_only = pol.baseline, pol.candidate, pol.baseline_is_model  # --baseline in it
        self.baseline, self.baseline_model, self.candidate = resolve_baseline(output, base, candidate, model_only)
        self._against_none: dict = {}
        self._against_baseline: dict = {}
        self.between = self._between_models()
        self.family_size = self._adjust_family()

    # ------------------------------------------------------------------ names and records
    def name(self, run) -> str:
        return run.label if self.several else run.setting

    def record(self, section, run=None, task="", metric="", statistic="value", value=None, **extra):
        self.records.append({"section": section, "model": run.model if run else "", "setting": run.setting if run else "",
                             "task": task, "metric": metric, "statistic": statistic, "value": _clean(value), **extra})

    def direction(self, task: str, metric: str, run=None):
        """``higher_is_better`` of a metric: the results file's, else its recorded definition's."""
        tr = run.tasks.get(task) if run is not None else None
        hib = tr.higher_is_better.get(metric) if tr is not None else None
        return hib if hib is not None else (self.cat.get(task, {}).get(metric) or {}).get("higher_is_better")

    def label(self, task: str, metric: str) -> str:
        return label(self.cat, task, metric)

    def percent(self, task: str, metric: str) -> bool:
        """The metric is a relative change, written as a percentage (its hint's ``format``)."""
        return (self.cat.get(task, {}).get(metric) or {}).get("format") == "percent"

    def headline(self, task: str) -> str | None:
        return headline(self.cat, task)

    def family(self, task: str) -> str:
        return (self.tasks.get(task) or {}).get("family") or task

    def cell(self, section, run, task, metric) -> dict:
        """One metric of one run with its 95% interval (recorded)."""
        m = self.output.metric(task, metric, run.setting, run.model)
        for stat in ("value", "lower", "upper", "stderr", "n"):
            v = getattr(m, stat)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.record(section, run, task, metric, stat, v)
        return {"metric": m.name, "value": m.value, "stderr": m.stderr, "lower": m.lower, "upper": m.upper,
                "n": m.n, "arrow": ARROWS.get(self.direction(task, metric, run), ""),
                "has_ci": finite(m.lower) and finite(m.upper)}

    def has(self, run, task: str, metric: str) -> bool:
        """``run`` has ``task``'s ``metric`` as a number."""
        tr = run.tasks.get(task)
        return tr is not None and finite(number(tr.values.get(metric)))

    # ------------------------------------------------------------------ comparisons
    def against_none(self, run, task: str, metric: str) -> dict | None:
        """``run``'s setting against its model's ``none`` run on ``metric``: ``d`` (the paired
        difference, ``Output.compare``) and ``mde`` (the smallest difference this pairing
        detects at 80% power); None for ``none`` itself, or without a comparison."""
        key = (run.model, run.setting, task, metric)
        if key not in self._against_none:
            self._against_none[key] = self._compare_with_none(run, task, metric)
        return self._against_none[key]

    def _compare_with_none(self, run, task, metric):
        base = self.output.runs.get((run.model, "none"))
        if run.setting == "none" or base is None or not (self.has(run, task, metric) and self.has(base, task, metric)):
            return None
        d = self.output.compare(task, metric, run.setting, "none", run.model)
        if d is None:
            return None
        a = self.output.metric(task, metric, run.setting, run.model)
        b = self.output.metric(task, metric, "none", run.model)
        if a.per_sample and b.per_sample:  # the documents Output.compare paired
            docs = shared_documents(a, b, same_hash=False)
            mde = power.minimum_detectable_effect([a.per_sample[k] for k in docs], [b.per_sample[k] for k in docs],
                                                  binary=a.binary)
        else:
            mde = power.mde_from_errors(a.stderr, b.stderr)
        return {"against": "none", "d": d, "mde": mde}

    def against_baseline(self, headline_only: bool = False) -> list:
        """The candidate against the baseline (``drift_eval.decide.compare.compare_models``):
        every compared metric, or the headline ones only; empty without a baseline."""
        if self.baseline is None:
            return []
        if headline_only not in self._against_baseline:
            self._against_baseline[headline_only] = compare_models(self.output, self.baseline, self.candidate,
                                                                   self.baseline_model, headline_only)
        return self._against_baseline[headline_only]

    def shown_comparisons(self):
        """(run, task, metric) of every comparison against ``none`` that a section shows: the
        settings section's metrics (``compared_metrics``) and each task's headline."""
        for run in self.output.ordered_runs():
            base = self.output.runs.get((run.model, "none"))
            if run.setting == "none" or base is None:
                continue
            names = compared_metrics(run, base) + [(t, self.headline(t)) for t in run.tasks if self.headline(t)]
            for task, metric in dict.fromkeys(names):
                yield run, task, metric

    def _between_models(self) -> dict:
        """``{(task, metric): Comparison}``: where the report holds two models and no
        baseline, the second against the first on each language task's headline (``none``
        of both, the documents both answered), so that two models are compared language by
        language without ``--baseline``; a language one of them did not run, or runs that
        are not one test, are left out."""
        # deferred, import cycle: the sections package, imported first, imports this module
        from drift_eval.reports.sections.languages import target_of

        models = self.output.models
        if len(models) != 2 or self.baseline is not None:
            return {}
        out = {}
        for task in self.output.task_names():
            metric = self.headline(task)
            if not metric or not target_of(self, task):
                continue
            try:
                out[(task, metric)] = compare_metric(self.output, self.output, task, metric, "none",
                                                     candidate_model=models[1], baseline_model=models[0])
            except DriftUsageError:
                continue
        return out

    def _adjust_family(self) -> int:
        """Every comparison the report shows (each setting against ``none``, the candidate
        against the baseline, the second model against the first language by language) as
        one family: their p-values adjusted together
        (``paired.adjust_family``, Benjamini–Hochberg), each verdict read from its adjusted
        p. The comparisons are computed here once and replaced by their adjusted versions,
        so every section reads the same verdict. Returns the family's size."""
        changes = [c for run, task, metric in self.shown_comparisons()
                   if (c := self.against_none(run, task, metric)) is not None]
        base = {(c.setting, c.task, c.metric): c for full in (False, True) for c in self.against_baseline(full)}
        adjusted = paired.adjust_family([c["d"] for c in changes] + [c.difference for c in base.values()]
                                        + [c.difference for c in self.between.values()])
        for change, d in zip(changes, adjusted):
            change["d"] = d
        rest = adjusted[len(changes):]
        by_key = {k: dataclasses.replace(c, difference=d) for (k, c), d in zip(base.items(), rest)}
        for full, comps in self._against_baseline.items():
            self._against_baseline[full] = [by_key[(c.setting, c.task, c.metric)] for c in comps]
        self.between = {k: dataclasses.replace(c, difference=d)
                        for (k, c), d in zip(self.between.items(), rest[len(base):])}
        return len(adjusted)

    def record_change(self, section: str, run, task: str, metric: str, change: dict) -> None:
        """The numbers of a comparison, as records (``against``: none, or the baseline model)."""
        d = change["d"]
        for stat in ("difference", "lower", "upper", "p_value", "p_adjusted", "n"):
            self.record(section, run, task, metric, stat, getattr(d, stat), against=change["against"])
        self.record(section, run, task, metric, "mde", change["mde"], against=change["against"])

    # ------------------------------------------------------------------ plots
    def plot(self, title: str, svg) -> dict:
        p = {"title": title, "svg": svg, "slug": f"{len(self.plots) + 1:02d}-{_slug(title)}"}
        self.plots.append(p)
        return p

    def colour(self, setting: str) -> str:
        """One colour per setting, the same in every plot."""
        return PALETTE[self.output.labels.index(setting) % len(PALETTE)]

    def multiples(self, title: str, curves: dict, x_label: str, y_label: str, y_range=None,
                  markers: bool = True) -> list:
        """Plots of one measurement over runs. ``curves``: run key -> (points, band or None).
        When a model ran several settings and there are several models: small multiples,
        one panel per model with its settings as lines (one colour per setting in every
        panel, shared axes); otherwise one plot, a line per run."""
        if not curves:
            return []
        runs = [self.output.runs[key] for key in curves]
        by_model: dict = {}
        for run in runs:
            by_model.setdefault(run.model, []).append(run)
        xs = [x for pts, _ in curves.values() for x, _ in pts] or [0.0, 1.0]
        if not (self.several and any(len(rs) > 1 for rs in by_model.values())):
            series = {self.name(r): curves[r.key][0] for r in runs}
            bands = {self.name(r): curves[r.key][1] for r in runs if curves[r.key][1]}
            colours = None if self.several else {r.setting: self.colour(r.setting) for r in runs}
            long_names = max(len(n) for n in series) > LONG_NAME  # a legend below keeps two plots a row
            svg = line_plot(series, title, x_label, y_label, bands or None, Style(
                y_range=y_range, markers=markers, colours=colours, width=PANEL_WIDTH if long_names else 600,
                legend="below" if long_names else "right"))
            return [self.plot(title, svg)]
        ys = [y for pts, _ in curves.values() for _, y in pts if finite(number(y))]
        shared_y = y_range or ((min(ys), max(ys)) if ys else None)
        out = []
        for model, model_runs in by_model.items():
            series = {r.setting: curves[r.key][0] for r in model_runs}
            bands = {r.setting: curves[r.key][1] for r in model_runs if curves[r.key][1]}
            svg = line_plot(series, model, x_label, y_label, bands or None, Style(
                y_range=shared_y, markers=markers, colours={r.setting: self.colour(r.setting) for r in model_runs},
                x_range=(min(xs), max(xs)), width=PANEL_WIDTH, legend_px=PANEL_LEGEND_PX))
            out.append(self.plot(f"{title} [{model}]", svg))
        return out
