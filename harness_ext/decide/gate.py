"""Release gates on results folders: ``drift-eval gate OUT --policy gate.yaml``.

The policy (``drift_eval.decide.policy``: its YAML form, checked once when it is loaded)
is judged here rule by rule on loaded results. Exit status: 0 every rule passes, 1 a rule
fails, 2 unusable input (policy or results) or a ``max_regression`` rule that the sample
cannot resolve ("underpowered", see ``drift_eval.decide.compare.judge``). The rule checks
are shared with the pytest plugin (``drift_results.expect``, ``drift_results.compare_to``).
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from drift_eval import inert
from drift_eval.decide.policy import ON, Policy, Rule, load_policy
from drift_eval.decide.results import load_output
from drift_eval.errors import DriftUsageError
from drift_eval.files import atomic_open, check_output_file


@dataclass
class Outcome:
    name: str
    passed: bool
    message: str
    status: str = ""            # pass | fail | underpowered (set from passed when empty)
    facts: dict | None = None   # a comparison's numbers, for JUnit and reports

    def __post_init__(self):
        self.status = self.status or ("pass" if self.passed else "fail")


def check(output, rule: Rule, setting: str | None = None, model: str | None = None) -> Outcome:
    """A ``min``/``max`` rule on one setting (``setting``: the one judged of a rule on
    every setting; else the rule's) of the rule's model, else ``model``. A metric that is
    missing or not a number raises ``DriftUsageError``."""
    setting = rule.setting if setting is None else setting
    task, metric, on = rule.task, rule.metric, rule.on
    m = output.metric(task, metric, setting, rule.model if rule.model is not None else model)
    if not isinstance(m.value, float):
        raise DriftUsageError(f"{task}/{metric} under {setting} is not a number ({type(m.value).__name__}); "
                              f"gate on a scalar metric")
    observed = {"value": m.value, "lower": m.lower, "upper": m.upper}[on]
    if math.isnan(observed):
        raise DriftUsageError(f"{task}/{metric} under {setting} has no {ON[on]} (no logged samples and no stderr): "
                              f"rerun with --log_samples, or gate on the value")
    failed = []
    if rule.min is not None and observed < rule.min:
        failed.append(f"< min {rule.min:g}")
    if rule.max is not None and observed > rule.max:
        failed.append(f"> max {rule.max:g}")
    label = rule.named(setting) or f"{task}/{metric} [{setting}] {ON[on]} {rule.bounds()}"
    if failed:
        msg = f"{m.where()}: {ON[on]} {observed:.4f} {' and '.join(failed)} (value {m.value:.4f}{m.spread()})"
    else:
        msg = f"{m.where()}: {ON[on]} {observed:.4f} {rule.bounds()}"
    return Outcome(label, not failed, msg)


def check_regression(candidate, baseline, rule: Rule, setting: str | None = None, underpowered: str = "fail",
                     model: str | None = None, baseline_model: str | None = None) -> Outcome:
    """A ``max_regression`` rule on one setting (as ``check``): the candidate against the
    baseline on their shared documents (``drift_eval.decide.compare``)."""
    from drift_eval.decide.compare import compare_metric, judge  # deferred, start-up: loads numpy

    setting = rule.setting if setting is None else setting
    model = rule.model if rule.model is not None else model
    tol = rule.max_regression
    c = compare_metric(candidate, baseline, rule.task, rule.metric, setting, model, baseline_model)
    j = judge(c, tol, rule.on, underpowered)
    d = c.difference
    facts = {"candidate": c.candidate, "baseline": c.baseline, "candidate_value": c.candidate_value,
             "baseline_value": c.baseline_value, "difference": d.difference, "lower": d.lower, "upper": d.upper,
             "p_value": d.p_value, "test": d.test, "n": d.n, "mde": c.mde, "regression": c.regression[0],
             "max_regression": tol}
    label = rule.named(setting) or (f"{rule.task}/{rule.metric} [{setting}] {c.candidate} vs {c.baseline}: "
                                    f"regression ({rule.on}) <= {tol:g}")
    return Outcome(label, j.status == "pass", j.message, j.status, facts)


def resolve_baseline(output, baseline: str | None, candidate: str | None, model_only: bool = False):
    """(baseline results, baseline model, candidate model) for ``baseline``: a folder
    (holding one model), or a model name in ``output`` (``model_only``: only that);
    (None, None, candidate) without one."""
    if baseline is None:
        return None, None, candidate
    if not model_only and os.path.isdir(baseline):
        base = load_output(baseline)
        return base, base.model(None), output.model(candidate)
    if baseline not in output.models:
        raise DriftUsageError(f"baseline '{baseline}' is neither a results folder nor a model in {output.root} "
                              f"(models: {', '.join(output.models)})")
    others = [m for m in output.models if m != baseline]
    if candidate is None:
        if len(others) != 1:
            raise DriftUsageError(f"{output.root} holds {len(others)} models besides the baseline "
                                  f"({', '.join(others)}): name the candidate")
        candidate = others[0]
    return output, baseline, output.model(candidate)


def evaluate_policy(output, policy: Policy, baseline=None, baseline_model=None, candidate=None) -> list:
    """Outcomes of every rule (for ``setting: all``, one per setting of the candidate);
    ``baseline``, ``baseline_model``, ``candidate``: as ``resolve_baseline`` gives them."""
    outcomes = []
    for r in policy.rules:
        model = r.model if r.model is not None else candidate
        for s in output.settings_of(model) if r.setting == "all" else [r.setting]:
            if r.against_baseline:
                outcomes.append(check_regression(output, baseline, r, s, policy.underpowered, model, baseline_model))
            else:
                outcomes.append(check(output, r, s, model))
    return outcomes


def write_junit(outcomes: list, path: str, suite: str = "drift-eval gate", error: str | None = None) -> None:
    """One test case per outcome (an underpowered comparison is an error case; a
    comparison's numbers are the case's properties); ``error``: the gate could not finish,
    and the file holds one error case saying why (never a passing file)."""
    def text(value) -> str:  # one line, only characters XML 1.0 allows, controls shown escaped
        return inert.terminal(value, one_line=True)

    failures = sum(o.status == "fail" for o in outcomes)
    errors = sum(o.status == "underpowered" for o in outcomes) + bool(error)
    ts = ET.Element("testsuite", name=suite, tests=str(len(outcomes) + bool(error)), failures=str(failures),
                    errors=str(errors))
    for o in outcomes:
        tc = ET.SubElement(ts, "testcase", classname="drift_gate", name=text(o.name))
        if o.facts:
            props = ET.SubElement(tc, "properties")
            for k, v in o.facts.items():
                ET.SubElement(props, "property", name=k, value=f"{v:.6g}" if isinstance(v, float) else text(v))
        if o.status == "pass":
            ET.SubElement(tc, "system-out").text = text(o.message)
        else:
            kind = "failure" if o.status == "fail" else "error"
            ET.SubElement(tc, kind, message=text(o.message), type=o.status).text = text(o.message)
    if error:
        tc = ET.SubElement(ts, "testcase", classname="drift_gate", name="unusable input")
        ET.SubElement(tc, "error", message=text(error)).text = text(error)
    with atomic_open(path, "wb") as fh:
        ET.ElementTree(ts).write(fh, encoding="utf-8", xml_declaration=True)


LABEL = {"pass": "PASS", "fail": "FAIL", "underpowered": "UNDERPOWERED"}


def gate(output, policy: Policy | str, baseline: str | None = None):
    """(outcomes, policy) of a policy on loaded results, judged against ``baseline``
    (``--baseline``) or the policy's own; the policy returned names the baseline used.
    ``policy``: a ``Policy``, or a policy file's path (loaded with ``load_policy``).
    Unusable input raises ``DriftUsageError``."""
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    policy = policy.with_baseline(baseline)
    base, base_model, candidate = resolve_baseline(output, policy.baseline, policy.candidate, policy.baseline_is_model)
    return evaluate_policy(output, policy, base, base_model, candidate), policy


#: the exit status of a gate whose rules all pass or cannot be decided, one of them at least
#: underpowered: the sample cannot tell a regression of that size from none. Undetermined is
#: neither a pass (0) nor a failure (1), and not unusable input (2, which nothing else exits).
UNDETERMINED = 3


def exit_status(outcomes: list) -> int:
    """1 when a rule failed; else ``UNDETERMINED`` (3) when a comparison was underpowered;
    else 0."""
    statuses = {o.status for o in outcomes}
    return 1 if "fail" in statuses else UNDETERMINED if "underpowered" in statuses else 0


VERDICT = {0: "PASS", 1: "FAIL", UNDETERMINED: "UNDETERMINED"}


def status_counts(outcomes: list) -> dict:
    """``{status: how many outcomes have it}`` for every status of ``LABEL``."""
    return {k: sum(o.status == k for o in outcomes) for k in LABEL}


def summary_markdown(outcomes: list, results_dir: str, policy: str, baseline: str | None = None,
                     error: str | None = None) -> str:
    """The gate's outcome as a short Markdown summary for a CI page (GitHub's job summary):
    the verdict, one row per rule, and, for each comparison with a baseline, the smallest
    regression its sample can detect beside the rule's tolerance. Names and messages from
    the results and the policy are code spans (``inert.markdown``): they cannot add markup,
    links or lines. ``error``: the gate could not finish (unusable input)."""
    from drift_eval.metrics.power import mde_text  # deferred, start-up: loads numpy

    verdict = "UNUSABLE INPUT" if error else VERDICT[exit_status(outcomes)]
    lines = [f"## drift-eval gate: {verdict}", "",
             f"Results {inert.markdown(results_dir)}, policy {inert.markdown(policy)}"
             + (f", baseline {inert.markdown(baseline)}" if baseline else "") + ".", ""]
    if error:
        return "\n".join(lines + [f"The gate could not finish: {inert.markdown(error)} (exit 2).", ""])
    counts = status_counts(outcomes)
    lines += [f"{counts['pass']} passed, {counts['fail']} failed, {counts['underpowered']} underpowered.", "",
              "| outcome | rule | detail | smallest detectable regression | tolerance |", "|---|---|---|---|---|"]
    for o in outcomes:
        facts = o.facts or {}
        mde, tol = facts.get("mde"), facts.get("max_regression")
        detectable = mde_text(mde) if isinstance(mde, float) else "—"
        tolerance = f"{tol:g}" if isinstance(tol, (int, float)) else "—"
        lines.append(f"| {LABEL[o.status]} | {inert.markdown(o.name, cell=True)} | "
                     f"{inert.markdown(o.message, cell=True)} | {detectable} | {tolerance} |")
    return "\n".join(lines + [""])


def summary_target(summary: str | None) -> tuple[str | None, bool]:
    """(the file the summary goes to, whether it is appended to): ``--summary FILE``
    (replaced), else the file GitHub Actions names in ``GITHUB_STEP_SUMMARY`` (appended to,
    as GitHub expects), else none. Checked before any work: a path that cannot take the
    summary is one ``DriftUsageError`` line."""
    if summary:
        return check_output_file(summary, "--summary"), False
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step is None or step == "":
        return None, False
    if "\x00" in step:
        raise DriftUsageError("GITHUB_STEP_SUMMARY holds a NUL character: not a path")
    return check_output_file(step, "GITHUB_STEP_SUMMARY"), True


def write_summary(text: str, path: str, append: bool) -> None:
    if append:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    else:
        with atomic_open(path) as fh:
            fh.write(text)


def run_gate(results_dir: str, policy: str, junit_xml: str | None = None, log=print,
             baseline: str | None = None, summary: str | None = None) -> int:
    """The policy file ``policy`` on ``results_dir``: exit status 0 (every rule passes), 1
    (a rule fails) or 3 (no rule fails, one is underpowered: undetermined); unusable input raises
    ``DriftUsageError`` after replacing ``junit_xml`` with an error case. The Markdown summary
    (``summary_markdown``) goes to ``summary`` or to ``$GITHUB_STEP_SUMMARY`` (``summary_target``)."""
    summary_path, append = summary_target(summary)
    if junit_xml:
        write_junit([], junit_xml, error="the gate has not finished")  # the path is writable, and no old pass stays
    try:
        checked = load_policy(policy).with_baseline(baseline)  # a bad policy is reported before results are read
        outcomes, _ = gate(load_output(results_dir), checked)
    except DriftUsageError as exc:
        if junit_xml:
            write_junit([], junit_xml, error=exc.message)
        if summary_path:
            write_summary(summary_markdown([], results_dir, policy, baseline, error=exc.message), summary_path, append)
        raise

    for o in outcomes:  # one line each, whatever a name from the results holds
        log(f"{LABEL[o.status]}  {inert.terminal(o.name, one_line=True)}: {inert.terminal(o.message, one_line=True)}")
    counts = status_counts(outcomes)
    log(f"{counts['pass']} passed, {counts['fail']} failed"
        + (f", {counts['underpowered']} underpowered" if counts["underpowered"] else ""))
    if junit_xml:
        write_junit(outcomes, junit_xml)
    if summary_path:
        write_summary(summary_markdown(outcomes, results_dir, policy, baseline), summary_path, append)
    return exit_status(outcomes)
