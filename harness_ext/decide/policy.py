"""A release gate's policy, checked once, when it is loaded, into a frozen ``Policy``.

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

``load_policy`` reads a file, ``policy_from`` and ``rule_from`` check what code builds
(the pytest plugin's ``expect`` and ``compare_to``). A ``max_regression`` rule needs a
metric with a direction: one whose task YAML says ``higher_is_better: null``
(``drift_eval.tasks.metric_catalogue``) is refused here, before any result is read (the
direction the run recorded decides when the results are read); ``min``/``max`` bound any
metric.
Every key and value is checked here,
each problem one ``DriftUsageError`` line naming the file and the rule, before any result
is read; what judges a policy (``drift_eval.decide.gate``) takes the object as it is.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from drift_eval.errors import DriftUsageError
from drift_eval.files import read_text
from drift_eval.metrics.values import is_finite
from drift_eval.tasks import metric_catalogue

#: what a rule's ``on`` reads, by name: the value, or a bound of its 95% interval
ON = {"value": "value", "lower": "lower 95% bound", "upper": "upper 95% bound"}
RULE_KEYS = {"name", "task", "metric", "setting", "on", "min", "max", "max_regression", "model"}
POLICY_KEYS = {"rules", "baseline", "candidate", "underpowered"}
UNDERPOWERED = ("fail", "warn")
POLICY_BYTES = 1_000_000


@dataclass(frozen=True)
class Rule:
    """One rule: ``min``/``max`` on the candidate's own value or bound, or
    ``max_regression`` against the baseline (then ``on`` defaults to ``upper``)."""
    task: str
    metric: str
    setting: str = "none"                # a setting label, or "all"
    on: str = "value"                    # a key of ON
    min: float | None = None
    max: float | None = None
    max_regression: float | None = None  # >= 0
    name: str | None = None
    model: str | None = None             # the model judged, instead of the policy's candidate

    @property
    def against_baseline(self) -> bool:
        return self.max_regression is not None

    def named(self, setting: str) -> str | None:
        """The rule's name for one of the settings it judges (a rule on every setting
        names each one)."""
        return f"{self.name} [{setting}]" if self.name and self.setting == "all" else self.name

    def bounds(self) -> str:
        """``>= 0.8``, ``<= 0.1``, ``>= 0.2 and <= 0.9``."""
        return " and ".join(filter(None, [f">= {self.min:g}" if self.min is not None else "",
                                          f"<= {self.max:g}" if self.max is not None else ""]))


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]              # at least one
    baseline: str | None = None          # a results folder (resolved against the policy file's) or a model name
    candidate: str | None = None
    underpowered: str = "fail"           # one of UNDERPOWERED
    baseline_is_model: bool = False      # the policy's baseline names a model of the results, never a folder

    def with_baseline(self, baseline: str | None) -> "Policy":
        """This policy judged against ``baseline`` (``--baseline``: it overrides the
        policy's) or its own; a ``max_regression`` rule without either is unusable."""
        policy = dataclasses.replace(self, baseline=baseline, baseline_is_model=False) if baseline else self
        if policy.baseline is None:
            for r in policy.rules:
                if r.against_baseline:
                    raise DriftUsageError(f"rule on {r.task}/{r.metric}: max_regression needs a baseline "
                                          f"(baseline: in the policy, or --baseline)")
        return policy


def _number(v, what: str) -> float:
    if not is_finite(v):
        raise DriftUsageError(f"{what} must be a finite number, got {v!r}")
    return float(v)


def _has_no_direction(task: str, metric: str) -> bool:
    """Whether the task YAMLs list ``metric`` of ``task`` with no direction (informational:
    lengths, counts, shares of undetermined answers). A metric they do not list (one added at
    run time, or a task of another package) is judged when the results are read."""
    info = metric_catalogue().get(task, {}).get(metric)
    return info is not None and info.get("higher_is_better") is None


def rule_from(raw: dict, where: str | None = None) -> Rule:
    """A ``Rule`` from its keys as written in a policy, every one checked. ``where``: where
    it was written, for messages (``gate.yaml: rule 2``); a rule built in code (the pytest
    plugin) is named by its task and metric. A key given means a value given (``min:``
    with no value is not a number)."""
    r = dict(raw)
    if not isinstance(r.get("task"), str) or not isinstance(r.get("metric"), str):
        raise DriftUsageError(f"{where or 'a rule'} needs 'task' and 'metric' (names)")
    ident = f"{r['task']}/{r['metric']}"
    subject = f"{where} ({ident})" if where else f"rule on {ident}"
    where = where or f"rule on {ident}"
    if True in r:  # YAML 1.1 reads the bare key `on` as the boolean true
        r["on"] = r.pop(True)
    extra = sorted(map(str, set(r) - RULE_KEYS))
    if extra:
        raise DriftUsageError(f"{where} has unknown key(s) {', '.join(extra)}; allowed: {', '.join(sorted(RULE_KEYS))}")
    bounded, relative = "min" in r or "max" in r, "max_regression" in r
    if bounded == relative:
        raise DriftUsageError(f"{subject} needs min or max, or max_regression (against the baseline), not both")
    for key in ("name", "setting", "on", "model"):
        v = r.get(key)
        if key in r and (isinstance(v, bool) or not isinstance(v, (str, int, float))):
            raise DriftUsageError(f"{where}: '{key}' must be text, got {r[key]!r}")
    lo, hi, tol = (_number(r[k], f"{where}: {k}") if k in r else None for k in ("min", "max", "max_regression"))
    if lo is not None and hi is not None and lo > hi:
        raise DriftUsageError(f"{where}: min {lo:g} is above max {hi:g}, so no value could pass; fix the policy")
    if tol is not None and tol < 0:
        raise DriftUsageError(f"{where}: max_regression must be >= 0, got {tol:g}")
    if relative and _has_no_direction(r["task"], r["metric"]):
        raise DriftUsageError(f"{subject} has no direction (higher_is_better: null in its task YAML), so "
                              f"max_regression cannot say which way is worse; use min or max")
    on = r.get("on", "upper" if relative else "value")
    if on not in ON:
        raise DriftUsageError(f"{where}: 'on' must be one of {', '.join(ON)}, got {on!r}")
    text = {k: str(r[k]) for k in ("name", "setting", "model") if k in r}
    return Rule(r["task"], r["metric"], text.get("setting", "none"), on, lo, hi, tol, text.get("name"),
                text.get("model"))


def policy_from(doc, path: str | None = None) -> Policy:
    """A ``Policy`` from a parsed policy document (a dict with ``rules``...), every key and
    rule checked. ``path``: the file it came from, named in messages; a relative
    ``baseline`` that is a folder beside it is resolved against it."""
    at = f"{path}: " if path else ""
    rules = doc.get("rules") if isinstance(doc, dict) else None
    if not isinstance(rules, list) or not rules:
        raise DriftUsageError(f"{path or 'the policy'} needs a non-empty 'rules' list (each rule: task, metric, min/max "
                              f"or max_regression, optional setting and on)")
    extra = sorted(map(str, set(doc) - POLICY_KEYS))
    if extra:
        raise DriftUsageError(f"{path or 'the policy'} has unknown key(s) {', '.join(extra)}; allowed: "
                              f"{', '.join(sorted(POLICY_KEYS))}")
    for key in ("baseline", "candidate"):
        if key in doc and not isinstance(doc[key], str):
            raise DriftUsageError(f"{at}'{key}' must be a folder or a model name, got {doc[key]!r}")
    underpowered = doc.get("underpowered", "fail")
    if underpowered not in UNDERPOWERED:
        raise DriftUsageError(f"{at}'underpowered' must be fail or warn, got {underpowered!r}")
    checked = tuple(rule_from(r if isinstance(r, dict) else {}, f"{path}: rule {i}" if path else None)
                    for i, r in enumerate(rules, 1))
    baseline, is_model = doc.get("baseline"), False
    if baseline is not None and path is not None and not os.path.isabs(baseline):
        # a relative baseline is a folder beside the policy file, or else a model name: never a
        # folder of whatever working folder the gate runs in
        folder = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), baseline))
        if os.path.isdir(folder):
            baseline = folder
        elif "/" in baseline or os.sep in baseline or baseline.startswith("."):
            raise DriftUsageError(f"{at}baseline {baseline!r} is not a folder: {folder} does not exist "
                                  f"(a relative baseline is found beside the policy file)")
        else:
            is_model = True
    return Policy(checked, baseline, doc.get("candidate"), underpowered, is_model)


def load_policy(path: str) -> Policy:
    """The policy file (UTF-8 YAML, at most ``POLICY_BYTES``), checked: ``policy_from``."""
    import yaml  # deferred, start-up: loads yaml

    text = read_text(path, "policy file", remedy="fix the policy file", max_bytes=POLICY_BYTES)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DriftUsageError(f"{path} is not valid YAML{where}: fix the policy file") from None
    except RecursionError:
        raise DriftUsageError(f"{path} nests too deep to be a policy: fix the policy file") from None
    return policy_from(doc, path)
