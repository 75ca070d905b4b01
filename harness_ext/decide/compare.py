"""A candidate model against a baseline model, on the documents both runs share.

* 0/1 per-sample metrics: the exact McNemar test on the discordant pairs, and Tango's
  score interval (continuity-corrected) for the difference of paired proportions; other
  per-sample metrics (rates, per-turn values): the paired sign-flip permutation test
  (exact on the nonzero differences when they are few) and the 95% interval of the shifts
  that test keeps (``drift_eval.metrics.paired.paired_difference``). Documents pair by ``doc_id``
  and must hold the same document (``doc_hash``) in both runs.
* The **minimum detectable effect** (MDE): the smallest difference the test finds with 80%
  power at this n (exact McNemar power with the observed disagreement as two-way
  background and the effect's flips one way on top; the t approximation at the observed
  spread otherwise). "No significant regression" means "no regression" only when the MDE
  is below the regression one cares about.
* Metrics without per-sample values in both runs (fitted α, runs without
  ``--log_samples``): a z test on the two standard errors, and its MDE.
* ``adjust_comparisons``: the comparisons one view shows, as one family (Benjamini–Hochberg,
  ``paired.adjust_family``): ``drift-eval compare`` calls significant only what survives it.
  ``judge`` (a gate's rule) never adjusts: a policy's rules are written before the run, and
  each is its own decision at its own level.

``regression`` is the difference turned so that positive means the candidate is worse
(by the metric's ``higher_is_better``). Pure Python and scipy, no torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from drift_eval.catalogue import conditional_partner, hinted, is_curve
from drift_eval.decide.policy import ON
from drift_eval.errors import DriftUsageError
from drift_eval.metrics import paired, power
from drift_eval.metrics.values import is_finite, is_number


@dataclass(frozen=True)
class Comparison:
    task: str
    metric: str
    setting: str
    candidate: str
    baseline: str
    candidate_value: float
    baseline_value: float
    difference: paired.PairedDifference
    mde: float
    higher_is_better: bool | None
    #: for a conditional metric (defined only on the documents where an outcome occurred), its
    #: unconditional partner (``drift_eval.catalogue.conditional_partner``)
    conditional_on: str | None = None

    @property
    def n(self) -> int:
        return self.difference.n

    @property
    def regression(self) -> tuple[float, float, float]:
        """(value, lower, upper): how much worse the candidate is (positive = worse)."""
        d = self.difference
        if self.higher_is_better is False:
            return (d.difference, d.lower, d.upper)
        return (0.0 - d.difference, 0.0 - d.upper, 0.0 - d.lower)  # 0.0 - x: no "-0.0000" for no change

    def where(self) -> str:
        return f"{self.task}/{self.metric}{self.conditional_note()} under {self.setting}, {self.candidate} vs {self.baseline}"

    def conditional_note(self) -> str:
        """`` (conditional: ...)`` for a conditional metric, else empty: its documents are
        those where an outcome occurred in both runs, which the runs themselves select."""
        if not self.conditional_on:
            return ""
        return (f" (conditional: on the documents where it is defined in both runs, which their outcomes select; "
                f"on every document: {self.conditional_on})")

    def describe(self) -> str:
        d = self.difference
        ci = "" if math.isnan(d.lower) else f" (95% CI [{d.lower:+.4f}, {d.upper:+.4f}])"
        mde = power.mde_text(self.mde)
        adj = f", {paired.ADJUSTMENT}-adjusted p {d.p_adjusted:.4g} over {d.family}" if d.adjusted else ""
        return (f"{self.where()}: {self.candidate_value:.4f} vs {self.baseline_value:.4f}, difference "
                f"{d.difference:+.4f}{ci}, p {d.p_value:.4g} ({d.test}, n={d.n}){adj}, {d.verdict}; smallest "
                f"difference detectable at 80% power: {mde}")

    __repr__ = describe


class NotTheSameTest(DriftUsageError):
    """Two runs of a task whose answers were made to different lengths (forced against
    unforced), or of two versions of the task (its metrics defined differently): never
    compared, not even left out quietly."""


def shared_documents(a, b, same_hash: bool = True) -> list:
    """The ``doc_id`` keys both metrics' per-sample values have, in a stable order; with
    ``same_hash``, only those holding the same document (same ``doc_hash``) in both. Without
    it, documents pair by ``doc_id`` alone: two settings of one run, or a control task whose
    documents differ from the plain task's by design (the conflict turn). Two runs whose
    answers were made to different lengths (forced against unforced: ``runfile.Length``)
    are one line, and so are two runs of one task at different task versions (a new version
    defines its metrics differently: the task README's version history)."""
    if a.length and b.length and a.length != b.length:
        raise NotTheSameTest(f"{a.where()} has answers {a.length} and {b.where()} answers {b.length}: not the same "
                              f"test, so they are not compared; compare runs whose answers were made alike")
    if a.task == b.task and a.version and b.version and a.version != b.version:
        raise NotTheSameTest(f"{a.where()} ran at task version {a.version} and {b.where()} at {b.version}: the "
                              f"metrics are defined differently, so they are not compared; rerun the older run on "
                              f"this version of the task and compare again")
    keys = sorted(set(a.per_sample) & set(b.per_sample), key=repr)
    if not same_hash:
        return keys
    ha, hb = a.doc_hashes or {}, b.doc_hashes or {}
    return [k for k in keys if ha.get(k) is None or hb.get(k) is None or ha[k] == hb[k]]


def compare_metric(candidate, baseline, task: str, metric: str, setting: str = "none",
                   candidate_model: str | None = None, baseline_model: str | None = None) -> Comparison:
    """``candidate`` and ``baseline``: loaded results (``Output``), possibly the same folder
    with two model names."""
    a = candidate.metric(task, metric, setting, model=candidate_model)
    b = baseline.metric(task, metric, setting, model=baseline_model)
    names = (a.model, b.model)
    if not isinstance(a.value, float) or not isinstance(b.value, float):
        raise DriftUsageError(f"{task}/{metric} is not a number in both runs: compare scalar metrics")
    if a.per_sample and b.per_sample:
        docs = shared_documents(a, b)
        if not docs:
            raise DriftUsageError(f"{task}/{metric} under {setting}: {names[0]} and {names[1]} share no document "
                                  f"(same doc_id and doc_hash): compare runs of the same task and data")
        x = [a.per_sample[k] for k in docs]
        y = [b.per_sample[k] for k in docs]
        diff = paired.paired_difference(x, y, binary=a.binary)  # one task and metric: b.binary is the same
        mde = power.minimum_detectable_effect(x, y, binary=a.binary)
        cv, bv = sum(x) / len(x), sum(y) / len(y)
    elif all(is_finite(v) for v in (a.stderr, b.stderr)):
        diff = paired.difference_from_errors(a.value, a.stderr, b.value, b.stderr, min(a.n or 0, b.n or 0))
        mde = power.mde_from_errors(a.stderr, b.stderr)
        cv, bv = a.value, b.value
    else:
        raise DriftUsageError(f"{task}/{metric} under {setting} has neither logged samples nor a standard error in "
                              f"both runs: rerun with --log_samples")
    hib = a.higher_is_better if a.higher_is_better is not None else b.higher_is_better

    return Comparison(task, metric, setting, names[0], names[1], cv, bv, diff, mde, hib,
                      conditional_partner(candidate.catalogue, task, metric))


@dataclass(frozen=True)
class Judgement:
    """A ``max_regression`` rule applied to a comparison: ``status`` is ``pass``, ``fail``
    or ``underpowered``."""
    status: str
    message: str
    comparison: Comparison


def judge(c: Comparison, max_regression: float, on: str = "upper", underpowered: str = "fail") -> Judgement:
    """The candidate fails when it is worse than the baseline beyond ``max_regression``
    (``on`` and ``underpowered`` as a checked ``drift_eval.decide.policy`` gives them):

    1. the regression's lower 95% bound is above the tolerance: worse beyond it, whatever n;
    2. otherwise, when the minimum detectable effect exceeds the tolerance, the sample
       cannot resolve it: ``underpowered`` (``underpowered: warn`` notes it and goes on);
    3. otherwise the regression's ``on`` value (``value``, ``lower`` or ``upper`` bound)
       must not exceed the tolerance.

    Each rule is judged on its own comparison's interval, with no family adjustment: a
    policy is written before the run, so its rules are decisions fixed in advance, not a
    search through many comparisons for the ones that look different."""
    if c.higher_is_better is None:
        raise DriftUsageError(f"{c.task}/{c.metric} has no direction (higher_is_better): a regression rule needs one")
    value, lower, upper = c.regression
    observed = {"value": value, "lower": lower, "upper": upper}[on]
    if math.isnan(observed):  # no interval (a single document): the point estimate
        observed = value
    tol = f"tolerance {max_regression:g}"
    core = (f"regression {value:+.4f} (95% CI [{lower:+.4f}, {upper:+.4f}]), n={c.n}, "
            f"p {c.difference.p_value:.4g} ({c.difference.test})")
    facts = f"{core}, detectable at 80% power: {power.mde_text(c.mde)}"
    if lower > max_regression:
        return Judgement("fail", f"{c.where()}: worse beyond the {tol}: {facts}", c)
    note = ""
    if c.mde > max_regression:
        msg = (f"{c.where()}: underpowered: the smallest regression this sample detects at 80% power is "
               f"{power.mde_text(c.mde, infinite='above 1')}, above the {tol}, so a pass would not mean "
               f"no regression ({core}); use more documents or a larger tolerance")
        if underpowered != "warn":
            return Judgement("underpowered", msg, c)
        note = " [warning: underpowered, the pass or failure rests on too few documents]"
    name = "regression" if on == "value" else ON[on]
    if observed > max_regression:
        return Judgement("fail", f"{c.where()}: {name} {observed:+.4f} > {tol}: {facts}{note}", c)
    return Judgement("pass", f"{c.where()}: {name} {observed:+.4f} <= {tol}: {facts}{note}", c)


def adjust_comparisons(comparisons) -> list:
    """The comparisons as one family: each with its difference's Benjamini–Hochberg adjusted
    p and the verdict read from it (``paired.adjust_family``); raw p, interval and MDE kept."""
    comparisons = list(comparisons)
    adjusted = paired.adjust_family([c.difference for c in comparisons])
    return [replace(c, difference=d) for c, d in zip(comparisons, adjusted)]


def compared_metrics(candidate_run, baseline_run, headline_only: bool = False) -> list:
    """(task, metric) pairs worth comparing between two runs, from the candidate's metric
    definitions (``TaskResult.definitions``, as its run recorded them): each group's
    aggregate metrics (the headline), then each task's ``key`` and ``summary`` metrics
    (every scalar metric but curves for a task without hints), with each conditional
    metric's unconditional partner (``drift_eval.catalogue.conditional_partner``) listed
    too, so that the question is also answered on every document. ``headline_only``: the
    groups' metrics, or the first ``summary`` metric when no group was run."""
    cat = {task: tr.definitions or {} for task, tr in candidate_run.tasks.items()}
    out = []
    for task, tr in candidate_run.tasks.items():
        other = baseline_run.tasks.get(task)
        if other is None or (headline_only and not tr.is_group):
            continue
        names = [] if tr.is_group else hinted(cat, task, "key", "summary")
        names = names or [m for m, v in tr.values.items() if is_number(v) and not is_curve(cat, task, m)]
        with_partners = []
        for m in names:
            partner = conditional_partner(cat, task, m)
            with_partners += [m] + ([partner] if partner else [])
        names = [m for m in dict.fromkeys(with_partners) if m in tr.values and m in other.values]
        out += [(task, m) for m in names]
    if headline_only and not out:
        out = [(t, ms[0]) for t in candidate_run.tasks if t in baseline_run.tasks
               and (ms := [m for m in hinted(cat, t, "summary") if m in candidate_run.tasks[t].values])][:1]
    return out


def compare_models(candidate, baseline, candidate_model: str | None = None, baseline_model: str | None = None,
                   headline_only: bool = False) -> list:
    """Comparisons of every setting both models ran, on ``compared_metrics``; metrics that
    cannot be compared (no samples nor standard errors, no shared document) are left out."""
    cm, bm = candidate.model(candidate_model), baseline.model(baseline_model)
    out = []
    for setting in candidate.settings_of(cm):
        base_run = baseline.runs.get((bm, setting))
        if base_run is None:
            continue
        for task, metric in compared_metrics(candidate.runs[(cm, setting)], base_run, headline_only):
            try:
                out.append(compare_metric(candidate, baseline, task, metric, setting, cm, bm))
            except NotTheSameTest:
                raise
            except DriftUsageError:
                continue
    return out
