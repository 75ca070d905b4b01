"""Release gates on results folders: ``drift-eval gate OUT --policy gate.yaml``.

Policy (YAML)::

    baseline: ../release-1.2/  # optional: a results folder (relative to this file), or a
                               # model name in OUT; needed by max_regression rules
    candidate: my-model        # optional: the model in OUT to judge (when OUT holds several)
    underpowered: fail         # fail (default: exit 2) | warn, for max_regression rules
    rules:
      - name: stays French without compensation      # optional, shown in reports
        task: drift_french_single
        metric: fully_french
        setting: none          # a setting label, or "all" (every setting); default none
        on: lower              # value | lower | upper (95% interval bounds); default value
        min: 0.8               # min and/or max, inclusive (the candidate's own value)
      - {task: drift_french_single, metric: fully_french, max_regression: 0.05, on: upper}

Exit status: 0 every rule passes, 1 a rule fails, 2 unusable input (policy or results) or
a ``max_regression`` rule that the sample cannot resolve ("underpowered", see
``drift_eval.decide.compare.judge``). The rule checks are shared with the pytest plugin
(``drift_results.expect``, ``drift_results.compare_to``).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from drift_eval.errors import DriftUsageError

ON = {"value": "value", "lower": "lower 95% bound", "upper": "upper 95% bound"}
RULE_KEYS = {"name", "task", "metric", "setting", "on", "min", "max", "max_regression", "model"}
POLICY_KEYS = {"rules", "baseline", "candidate", "underpowered"}
UNDERPOWERED = ("fail", "warn")


@dataclass
class Outcome:
    name: str
    passed: bool
    message: str
    status: str = ""            # pass | fail | underpowered (set from passed when empty)
    facts: dict | None = None   # a comparison's numbers, for JUnit and reports

    def __post_init__(self):
        self.status = self.status or ("pass" if self.passed else "fail")


@dataclass
class Policy:
    rules: list
    baseline: str | None = None      # a folder (resolved) or a model name
    candidate: str | None = None
    underpowered: str = "fail"


def _number(v, what):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise DriftUsageError(f"{what} must be a finite number, got {v!r}")
    return float(v)


def check(output, task: str, metric: str, setting: str = "none", min=None, max=None, on: str = "value",
          name: str | None = None, model: str | None = None) -> Outcome:
    """One rule on one setting. Bad rules or missing results raise DriftUsageError."""
    lo_lim, hi_lim = _number(min, f"rule on {task}/{metric}: min"), _number(max, f"rule on {task}/{metric}: max")
    if lo_lim is None and hi_lim is None:
        raise DriftUsageError(f"rule on {task}/{metric} has neither min nor max")
    if lo_lim is not None and hi_lim is not None and lo_lim > hi_lim:
        raise DriftUsageError(f"rule on {task}/{metric}: min {lo_lim:g} is above max {hi_lim:g}, so no value "
                              f"could pass; fix the policy")
    if on not in ON:
        raise DriftUsageError(f"rule on {task}/{metric}: 'on' must be one of {', '.join(ON)}, got {on!r}")
    m = output.metric(task, metric, setting, model)
    if not isinstance(m.value, float):
        raise DriftUsageError(f"{task}/{metric} under {setting} is not a number ({type(m.value).__name__}); "
                              f"gate on a scalar metric")
    observed = {"value": m.value, "lower": m.lower, "upper": m.upper}[on]
    if math.isnan(observed):
        raise DriftUsageError(f"{task}/{metric} under {setting} has no {ON[on]} (no logged samples and no stderr): "
                              f"rerun with --log_samples, or gate on the value")
    failed = []
    if lo_lim is not None and observed < lo_lim:
        failed.append(f"< min {lo_lim:g}")
    if hi_lim is not None and observed > hi_lim:
        failed.append(f"> max {hi_lim:g}")
    bounds = " and ".join(filter(None, [f">= {lo_lim:g}" if lo_lim is not None else "",
                                         f"<= {hi_lim:g}" if hi_lim is not None else ""]))
    label = name or f"{task}/{metric} [{setting}] {ON[on]} {bounds}"
    if failed:
        msg = f"{m.where()}: {ON[on]} {observed:.4f} {' and '.join(failed)} (value {m.value:.4f}{m.spread()})"
    else:
        msg = f"{m.where()}: {ON[on]} {observed:.4f} {bounds}"
    return Outcome(label, not failed, msg)


def check_regression(candidate, baseline, task: str, metric: str, setting: str = "none", max_regression=None,
                     on: str = "upper", underpowered: str = "fail", name: str | None = None,
                     model: str | None = None, baseline_model: str | None = None) -> Outcome:
    """One ``max_regression`` rule: the candidate against the baseline on their shared
    documents (``drift_eval.decide.compare``)."""
    from drift_eval.decide.compare import compare_metric, judge

    tol = _number(max_regression, f"rule on {task}/{metric}: max_regression")
    if tol is None or tol < 0:
        raise DriftUsageError(f"rule on {task}/{metric}: max_regression must be a number >= 0, got {max_regression!r}")
    c = compare_metric(candidate, baseline, task, metric, setting, model, baseline_model)
    j = judge(c, tol, on, underpowered)
    d = c.difference
    facts = {"candidate": c.candidate, "baseline": c.baseline, "candidate_value": c.candidate_value,
             "baseline_value": c.baseline_value, "difference": d.difference, "lower": d.lower, "upper": d.upper,
             "p_value": d.p_value, "test": d.test, "n": d.n, "mde": c.mde, "regression": c.regression[0],
             "max_regression": tol}
    label = name or f"{task}/{metric} [{setting}] {c.candidate} vs {c.baseline}: regression ({on}) <= {tol:g}"
    return Outcome(label, j.status == "pass", j.message, j.status, facts)


POLICY_BYTES = 1_000_000


def load_policy(path: str) -> Policy:
    """The policy file, every rule checked (keys, types, bounds) before any result is read."""
    import yaml

    from drift_eval.files import read_text

    text = read_text(path, "policy file", remedy="fix the policy file", max_bytes=POLICY_BYTES)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DriftUsageError(f"{path} is not valid YAML{where}: fix the policy file") from None
    except RecursionError:
        raise DriftUsageError(f"{path} nests too deep to be a policy: fix the policy file") from None
    rules = doc.get("rules") if isinstance(doc, dict) else None
    if not isinstance(rules, list) or not rules:
        raise DriftUsageError(f"{path} needs a non-empty 'rules' list (each rule: task, metric, min/max or "
                              f"max_regression, optional setting and on)")
    extra = sorted(map(str, set(doc) - POLICY_KEYS))
    if extra:
        raise DriftUsageError(f"{path} has unknown key(s) {', '.join(extra)}; allowed: {', '.join(sorted(POLICY_KEYS))}")
    for key in ("baseline", "candidate"):
        if key in doc and not isinstance(doc[key], str):
            raise DriftUsageError(f"{path}: '{key}' must be a folder or a model name, got {doc[key]!r}")
    underpowered = doc.get("underpowered", "fail")
    if underpowered not in UNDERPOWERED:
        raise DriftUsageError(f"{path}: 'underpowered' must be fail or warn, got {underpowered!r}")
    for i, r in enumerate(rules, 1):
        if not isinstance(r, dict) or not isinstance(r.get("task"), str) or not isinstance(r.get("metric"), str):
            raise DriftUsageError(f"{path}: rule {i} needs 'task' and 'metric' (names)")
        if True in r:  # YAML 1.1 reads the bare key `on` as the boolean true
            r["on"] = r.pop(True)
        extra = sorted(map(str, set(r) - RULE_KEYS))
        if extra:
            raise DriftUsageError(f"{path}: rule {i} has unknown key(s) {', '.join(extra)}; "
                                  f"allowed: {', '.join(sorted(RULE_KEYS))}")
        bounded, relative = "min" in r or "max" in r, "max_regression" in r
        if bounded == relative:
            raise DriftUsageError(f"{path}: rule {i} ({r['task']}/{r['metric']}) needs min or max, or max_regression "
                                  f"(against the baseline), not both")
        for key in ("name", "setting", "on", "model"):
            v = r.get(key)
            if key in r and (isinstance(v, bool) or not isinstance(v, (str, int, float))):
                raise DriftUsageError(f"{path}: rule {i}: '{key}' must be text, got {r[key]!r}")
        lo, hi, tol = (_number(r.get(k), f"{path}: rule {i}: {k}") for k in ("min", "max", "max_regression"))
        if lo is not None and hi is not None and lo > hi:
            raise DriftUsageError(f"{path}: rule {i}: min {lo:g} is above max {hi:g}, so no value could pass; "
                                  f"fix the policy")
        if tol is not None and tol < 0:
            raise DriftUsageError(f"{path}: rule {i}: max_regression must be >= 0, got {tol:g}")
        if r.get("on", "value") not in ON:
            raise DriftUsageError(f"{path}: rule {i}: 'on' must be one of {', '.join(ON)}, got {r['on']!r}")
    baseline = doc.get("baseline")
    if baseline is not None:
        folder = baseline if os.path.isabs(baseline) else os.path.join(os.path.dirname(os.path.abspath(path)), baseline)
        baseline = folder if os.path.isdir(folder) else baseline
    return Policy(rules, baseline, doc.get("candidate"), underpowered)


def resolve_baseline(output, baseline: str | None, candidate: str | None):
    """(baseline results, baseline model, candidate model) for ``baseline``: a folder
    (holding one model), or a model name in ``output``; (None, None, candidate) without one."""
    from drift_eval.decide.results import load_output

    if baseline is None:
        return None, None, candidate
    if os.path.isdir(baseline):
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


def evaluate_policy(output, policy, baseline=None, baseline_model=None, candidate=None) -> list:
    """Outcomes of every rule (for ``setting: all``, one per setting of the candidate)."""
    if isinstance(policy, list):
        policy = Policy(policy)
    outcomes = []
    for r in policy.rules:
        model = r.get("model", candidate)
        setting = str(r.get("setting", "none"))
        targets = output.settings_of(model) if setting == "all" else [setting]
        for s in targets:
            name = r.get("name")
            if name and setting == "all":
                name = f"{name} [{s}]"
            if "max_regression" in r:
                if baseline is None:
                    raise DriftUsageError(f"rule on {r['task']}/{r['metric']}: max_regression needs a baseline "
                                          f"(baseline: in the policy, or --baseline)")
                outcomes.append(check_regression(output, baseline, r["task"], r["metric"], s, r["max_regression"],
                                                 r.get("on", "upper"), policy.underpowered, name, model,
                                                 baseline_model))
            else:
                outcomes.append(check(output, r["task"], r["metric"], s, r.get("min"), r.get("max"),
                                      r.get("on", "value"), name, model))
    return outcomes


def write_junit(outcomes: list, path: str, suite: str = "drift-eval gate", error: str | None = None) -> None:
    """One test case per outcome (an underpowered comparison is an error case; a
    comparison's numbers are the case's properties); ``error``: the gate could not finish,
    and the file holds one error case saying why (never a passing file)."""
    import xml.etree.ElementTree as ET

    from drift_eval.files import atomic_open

    failures = sum(o.status == "fail" for o in outcomes)
    errors = sum(o.status == "underpowered" for o in outcomes) + bool(error)
    ts = ET.Element("testsuite", name=suite, tests=str(len(outcomes) + bool(error)), failures=str(failures),
                    errors=str(errors))
    for o in outcomes:
        tc = ET.SubElement(ts, "testcase", classname="drift_gate", name=o.name)
        if o.facts:
            props = ET.SubElement(tc, "properties")
            for k, v in o.facts.items():
                ET.SubElement(props, "property", name=k, value=f"{v:.6g}" if isinstance(v, float) else str(v))
        if o.status == "pass":
            ET.SubElement(tc, "system-out").text = o.message
        else:
            kind = "failure" if o.status == "fail" else "error"
            ET.SubElement(tc, kind, message=o.message, type=o.status).text = o.message
    if error:
        tc = ET.SubElement(ts, "testcase", classname="drift_gate", name="unusable input")
        ET.SubElement(tc, "error", message=error).text = error
    with atomic_open(path, "wb") as fh:
        ET.ElementTree(ts).write(fh, encoding="utf-8", xml_declaration=True)


LABEL = {"pass": "PASS", "fail": "FAIL", "underpowered": "UNDERPOWERED"}


def gate(output, policy_path: str, baseline: str | None = None):
    """(outcomes, policy) of a policy file on loaded results; unusable input raises
    ``DriftUsageError``."""
    policy = load_policy(policy_path)
    base, base_model, candidate = resolve_baseline(output, baseline or policy.baseline, policy.candidate)
    return evaluate_policy(output, policy, base, base_model, candidate), policy


def exit_status(outcomes: list) -> int:
    """2 when a comparison was underpowered, else 1 when a rule failed, else 0."""
    statuses = {o.status for o in outcomes}
    return 2 if "underpowered" in statuses else 1 if "fail" in statuses else 0


def run_gate(results_dir: str, policy: str, junit_xml: str | None = None, log=print, baseline: str | None = None) -> int:
    """Exit status 0 (every rule passes), 1 (a rule fails) or 2 (an underpowered
    comparison); other unusable input raises ``DriftUsageError`` after replacing
    ``junit_xml`` with an error case."""
    from drift_eval.decide.results import load_output

    if junit_xml:
        write_junit([], junit_xml, error="the gate has not finished")  # the path is writable, and no old pass stays
    try:
        load_policy(policy)  # a bad policy is reported before the results are read
        outcomes, _ = gate(load_output(results_dir), policy, baseline)
    except DriftUsageError as exc:
        if junit_xml:
            write_junit([], junit_xml, error=exc.message)
        raise
    for o in outcomes:
        log(f"{LABEL[o.status]}  {o.name}: {o.message}")
    counts = {k: sum(o.status == k for o in outcomes) for k in LABEL}
    log(f"{counts['pass']} passed, {counts['fail']} failed"
        + (f", {counts['underpowered']} underpowered" if counts["underpowered"] else ""))
    if junit_xml:
        write_junit(outcomes, junit_xml)
    return exit_status(outcomes)
