"""pytest plugin (entry point ``pytest11``): release gates written as ordinary tests.

    pytest gates/ --drift-results OUT_DIR

gives the session fixture ``drift_results`` (a ``DriftResults``) over the results folder
(one loader with ``drift-eval report`` and ``drift-eval gate``)::

    def test_no_regression_against_the_last_release(drift_results):
        drift_results.compare_to("releases/1.2/", "drift_french_single", "fully_french", max_regression=0.05)

    def test_french_holds_without_compensation(drift_results):
        drift_results.expect("drift_french_single", "fully_french", setting="none", on="lower", min=0.8)

    def test_log_compensation_helps(drift_results):
        d = drift_results.compare("drift_french_single", "fully_french", "log:0.25")
        assert d.difference >= 0, d

Unusable input (no ``--drift-results``, a damaged or partial folder, a task, metric or
setting that is not in the results) is reported as an *error*, not a failure, in one line,
and the session then exits with status 2 (as ``drift-eval gate`` does); a rule that does
not hold is an ordinary failure (exit status 1). A regression rule the sample cannot decide
(underpowered, with ``underpowered: fail``) is *undetermined*: an error, not a failure, in
one line (``UNDETERMINED``), and the session exits as pytest does for errors (1): only
unusable input makes it 2. Importing this module costs nothing: the
loader is imported on use.
"""
from __future__ import annotations

import functools
import os

import pytest

_UNUSABLE = pytest.StashKey[int]()


class UnusableResults(Exception):
    """The results cannot answer the question asked: reported as an error in one line."""


class Undetermined(Exception):
    """A regression rule the sample cannot decide (underpowered): an error in one line,
    neither a pass nor a failure."""


def pytest_addoption(parser):
    group = parser.getgroup("drift-eval", "release gates on lm-eval-drift results")
    group.addoption("--drift-results", metavar="OUT_DIR", default=None,
                    help="results folder (drift-eval sweep --output, or lm_eval --output_path) for the "
                         "drift_results fixture")


def pytest_report_header(config):
    path = config.getoption("--drift-results", default=None)
    return f"drift-eval results: {path}" if path else None


def _line(message: str) -> str:
    """A message for pytest's report: one line, its control and format characters shown
    escaped (``inert.terminal``): names from a results file cannot print lines of their own."""
    # deferred, start-up: pytest imports this plugin in every session
    from drift_eval import inert

    return inert.terminal(message, one_line=True)


def _usage_errors_are_errors(fn):
    """A missing task, metric or setting (``DriftUsageError``, which is a ``SystemExit`` a
    test must not raise) becomes ``UnusableResults`` with the loader's one-line message."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        # deferred, start-up: pytest imports this plugin in every session
        from drift_eval.errors import DriftUsageError

        __tracebackhide__ = True

        try:
            return fn(*args, **kwargs)
        except DriftUsageError as exc:
            raise UnusableResults(_line(exc.message)) from None

    return wrapper


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.excinfo is not None and call.excinfo.errisinstance(UnusableResults):
        report = outcome.get_result()
        report.longrepr = f"unusable drift results: {call.excinfo.value}"
        report.drift_unusable = True
        item.config.stash[_UNUSABLE] = item.config.stash.get(_UNUSABLE, 0) + 1
    elif call.excinfo is not None and call.excinfo.errisinstance(Undetermined):
        report = outcome.get_result()
        report.longrepr = f"undetermined drift gate: {call.excinfo.value}"
        report.drift_undetermined = True


def pytest_report_teststatus(report, config):
    if getattr(report, "drift_unusable", False) and report.failed:
        return "error", "E", "ERROR"
    if getattr(report, "drift_undetermined", False) and report.failed:
        return "error", "U", "UNDETERMINED"
    return None


def pytest_sessionfinish(session, exitstatus):
    if session.config.stash.get(_UNUSABLE, 0) and exitstatus in (0, 1):
        session.exitstatus = 2  # unusable input, as drift-eval gate exits


def _given(**keys) -> dict:
    """A rule's keys as a policy file would hold them: those given (not None)."""
    return {k: v for k, v in keys.items() if v is not None}


class DriftResults:
    """Metrics of a results folder per (model, setting), with intervals, paired
    comparisons between settings, and comparisons against a baseline model. ``model`` may
    be left out when the folder holds one model."""

    def __init__(self, output):
        self.output = output

    @property
    def settings(self) -> list:
        return self.output.labels

    @property
    def models(self) -> list:
        return self.output.models

    @_usage_errors_are_errors
    def metric(self, task: str, metric: str, setting: str = "none", model: str | None = None):
        """A ``Metric``: ``value``, ``stderr``, ``lower``/``upper`` (95% interval), ``n``,
        ``per_sample``; its repr reads as one line."""
        return self.output.metric(task, metric, setting, model)

    @_usage_errors_are_errors
    def value(self, task: str, metric: str, setting: str = "none", model: str | None = None):
        return self.metric(task, metric, setting, model).value

    @_usage_errors_are_errors
    def compare(self, task: str, metric: str, setting: str, baseline: str = "none", model: str | None = None):
        """Paired ``setting − baseline`` settings of one model (``difference``, ``lower``,
        ``upper``, ``p_value``, ``test``, ``verdict``), or None without logged samples."""
        return self.output.compare(task, metric, setting, baseline, model)

    @_usage_errors_are_errors
    def expect(self, task: str, metric: str, setting: str = "none", *, min=None, max=None, on: str = "value",
               model: str | None = None):
        """Assert ``min <= metric <= max`` on its value or an interval bound (``on``:
        value, lower, upper), with the same wording as ``drift-eval gate``."""
        # deferred, start-up: pytest imports this plugin in every session
        from drift_eval.decide.gate import check
        from drift_eval.decide.policy import rule_from

        __tracebackhide__ = True
        rule = rule_from(_given(task=task, metric=metric, setting=setting, on=on, min=min, max=max, model=model))
        outcome = check(self.output, rule)
        if not outcome.passed:
            raise AssertionError(_line(outcome.message))
        return outcome

    @_usage_errors_are_errors
    def compare_to(self, baseline, task: str, metric: str, setting: str = "none", *, max_regression=None,
                   on: str = "upper", underpowered: str = "fail", model: str | None = None):
        """This folder's model (``model``) against ``baseline``: a results folder (one
        model) or another model's name in this folder. Returns the ``Comparison``
        (``difference``, ``mde``, ``regression``...). With ``max_regression``, asserts as a
        gate rule does: worse beyond it fails the test; a sample too small to resolve it is
        an error (``underpowered="warn"``: judged anyway, with a note)."""
        # deferred, start-up: pytest imports this plugin in every session
        from drift_eval.decide.gate import check_regression, resolve_baseline
        from drift_eval.decide.policy import policy_from

        __tracebackhide__ = True
        policy = None if max_regression is None else policy_from(
            {"rules": [_given(task=task, metric=metric, setting=setting, on=on, max_regression=max_regression)],
             "underpowered": underpowered})  # checked before a baseline folder is read
        base, base_model, candidate = resolve_baseline(self.output, os.fspath(baseline), model)
        if policy is None:
            # deferred, start-up: pytest imports this plugin in every session
            from drift_eval.decide.compare import compare_metric

            return compare_metric(self.output, base, task, metric, setting, candidate, base_model)
        outcome = check_regression(self.output, base, policy.rules[0], underpowered=policy.underpowered,
                                   model=candidate, baseline_model=base_model)
        if outcome.status == "underpowered":
            raise Undetermined(_line(outcome.message))
        if outcome.status == "fail":
            raise AssertionError(_line(outcome.message))
        return outcome


@pytest.fixture(scope="session")
def drift_results(request) -> DriftResults:
    # deferred, start-up: pytest imports this plugin in every session
    from drift_eval.errors import DriftUsageError
    from drift_eval.decide.results import load_output

    path = request.config.getoption("--drift-results")
    if not path:
        raise UnusableResults("the drift_results fixture needs --drift-results OUT_DIR (a drift-eval sweep output "
                              "folder)")
    try:
        return DriftResults(load_output(path))
    except DriftUsageError as exc:
        raise UnusableResults(_line(f"--drift-results: {exc.message}")) from None
