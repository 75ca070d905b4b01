"""Release gates on a results folder: ``drift-eval gate OUT --policy gate.yaml``.

Policy (YAML)::

    rules:
      - name: stays French without compensation      # optional, shown in reports
        task: drift_french_single
        metric: fully_french
        setting: none          # a setting label, or "all" (every setting); default none
        on: lower              # value | lower | upper (95% interval bounds); default value
        min: 0.8               # min and/or max, inclusive

Exit status: 0 every rule passes, 1 a rule fails, 2 unusable input (policy or results).
The rule check is shared with the pytest plugin (``drift_results.expect``).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..errors import DriftUsageError

ON = {"value": "value", "lower": "lower 95% bound", "upper": "upper 95% bound"}
RULE_KEYS = {"name", "task", "metric", "setting", "on", "min", "max"}


@dataclass
class Outcome:
    name: str
    passed: bool
    message: str


def _number(v, what):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise DriftUsageError(f"{what} must be a finite number, got {v!r}")
    return float(v)


def check(output, task: str, metric: str, setting: str = "none", min=None, max=None, on: str = "value",
          name: str | None = None) -> Outcome:
    """One rule on one setting. Bad rules or missing results raise DriftUsageError."""
    lo_lim, hi_lim = _number(min, f"rule on {task}/{metric}: min"), _number(max, f"rule on {task}/{metric}: max")
    if lo_lim is None and hi_lim is None:
        raise DriftUsageError(f"rule on {task}/{metric} has neither min nor max")
    if lo_lim is not None and hi_lim is not None and lo_lim > hi_lim:
        raise DriftUsageError(f"rule on {task}/{metric}: min {lo_lim:g} is above max {hi_lim:g}, so no value "
                              f"could pass; fix the policy")
    if on not in ON:
        raise DriftUsageError(f"rule on {task}/{metric}: 'on' must be one of {', '.join(ON)}, got {on!r}")
    m = output.metric(task, metric, setting)
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
        msg = (f"{task}/{metric} under {setting}: {ON[on]} {observed:.4f} {' and '.join(failed)} "
               f"(value {m.value:.4f}{m.spread()})")
    else:
        msg = f"{task}/{metric} under {setting}: {ON[on]} {observed:.4f} {bounds}"
    return Outcome(label, not failed, msg)


POLICY_BYTES = 1_000_000


def load_policy(path: str) -> list:
    """The rules of a policy file, each checked (keys, types, bounds) before any result is read."""
    import yaml

    from ..files import read_text

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
        raise DriftUsageError(f"{path} needs a non-empty 'rules' list (each rule: task, metric, min/max, "
                              f"optional setting and on)")
    for i, r in enumerate(rules, 1):
        if not isinstance(r, dict) or not isinstance(r.get("task"), str) or not isinstance(r.get("metric"), str):
            raise DriftUsageError(f"{path}: rule {i} needs 'task' and 'metric' (names)")
        if True in r:  # YAML 1.1 reads the bare key `on` as the boolean true
            r["on"] = r.pop(True)
        extra = sorted(map(str, set(r) - RULE_KEYS))
        if extra:
            raise DriftUsageError(f"{path}: rule {i} has unknown key(s) {', '.join(extra)}; "
                                  f"allowed: {', '.join(sorted(RULE_KEYS))}")
        if "min" not in r and "max" not in r:
            raise DriftUsageError(f"{path}: rule {i} ({r['task']}/{r['metric']}) needs min or max")
        for key in ("name", "setting", "on"):
            v = r.get(key)
            if key in r and (isinstance(v, bool) or not isinstance(v, (str, int, float))):
                raise DriftUsageError(f"{path}: rule {i}: '{key}' must be text, got {r[key]!r}")
        lo, hi = (_number(r.get(k), f"{path}: rule {i}: {k}") for k in ("min", "max"))
        if lo is not None and hi is not None and lo > hi:
            raise DriftUsageError(f"{path}: rule {i}: min {lo:g} is above max {hi:g}, so no value could pass; "
                                  f"fix the policy")
        if r.get("on", "value") not in ON:
            raise DriftUsageError(f"{path}: rule {i}: 'on' must be one of {', '.join(ON)}, got {r['on']!r}")
    return rules


def evaluate_policy(output, rules: list) -> list:
    outcomes = []
    for r in rules:
        setting = str(r.get("setting", "none"))
        targets = output.labels if setting == "all" else [setting]
        for s in targets:
            name = r.get("name")
            if name and setting == "all":
                name = f"{name} [{s}]"
            outcomes.append(check(output, r["task"], r["metric"], s, r.get("min"), r.get("max"),
                                  r.get("on", "value"), name))
    return outcomes


def write_junit(outcomes: list, path: str, suite: str = "drift-eval gate", error: str | None = None) -> None:
    """One test case per outcome; ``error``: the gate could not finish, and the file holds
    one error case saying why (never a passing file)."""
    import xml.etree.ElementTree as ET

    from ..files import atomic_open

    failures = sum(not o.passed for o in outcomes)
    ts = ET.Element("testsuite", name=suite, tests=str(len(outcomes) + bool(error)), failures=str(failures),
                    errors=str(int(bool(error))))
    for o in outcomes:
        tc = ET.SubElement(ts, "testcase", classname="drift_gate", name=o.name)
        if o.passed:
            ET.SubElement(tc, "system-out").text = o.message
        else:
            ET.SubElement(tc, "failure", message=o.message).text = o.message
    if error:
        tc = ET.SubElement(ts, "testcase", classname="drift_gate", name="unusable input")
        ET.SubElement(tc, "error", message=error).text = error
    with atomic_open(path, "wb") as fh:
        ET.ElementTree(ts).write(fh, encoding="utf-8", xml_declaration=True)


def run_gate(results_dir: str, policy: str, junit_xml: str | None = None, log=print) -> int:
    """Exit status 0 (every rule passes) or 1 (a rule fails); unusable input raises
    ``DriftUsageError`` after replacing ``junit_xml`` with an error case."""
    from .results import load_output

    if junit_xml:
        write_junit([], junit_xml, error="the gate has not finished")  # the path is writable, and no old pass stays
    try:
        rules = load_policy(policy)
        output = load_output(results_dir)
        outcomes = evaluate_policy(output, rules)
    except DriftUsageError as exc:
        if junit_xml:
            write_junit([], junit_xml, error=exc.message)
        raise
    for o in outcomes:
        log(f"{'PASS' if o.passed else 'FAIL'}  {o.name}: {o.message}")
    failed = sum(not o.passed for o in outcomes)
    log(f"{len(outcomes) - failed} passed, {failed} failed")
    if junit_xml:
        write_junit(outcomes, junit_xml)
    return 1 if failed else 0
