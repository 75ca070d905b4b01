"""Results folders are data, never instructions: generated hostile folders (Hypothesis)
through every command that reads results. Their strings (model, task and metric names, the
answers and documents in the samples) draw from control characters, newlines, bidirectional
and other format characters, lone surrogates, markup, CSV formula prefixes, path separators
and ``..``, forged gate lines and very long text; their numbers from NaN, the infinities,
negatives, values above 1 and huge ones. Each command either refuses with one line and exit
status 2, or writes output that parses strictly (JSON, XML, CSV) and is inert (no raw
control or format character in the terminal, no live markup in HTML or rendered Markdown,
no formula cell), and no file outside its output folder. A few examples run in the fast
loop, more in the full suite (``slow``)."""
import contextlib
import csv
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unicodedata
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift_eval.cli import main
from support.commands import not_json

DATE = "2026-01-01T00-00-00.000000"
TASK, METRIC = "drift_french_single", "fully_french"
PWNED = '<b id="pwned">x</b>'
PIECES = [
    PWNED, "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[c](javascript:alert(1))",
    "![i](https://evil.example/i.png)", "# Heading", "a | b", "`", "=HYPERLINK(\"https://evil.example\")", "+1+1",
    "-2+3", "@SUM(A1)", "\t", "\r", "\n", "\x00", "\x1b[2J\x1b]0;pwned\x07", "\x85", "\x9b31m", "\x7f", "\u202e",
    "\u2066", "\u200b", "\ufeff", "\U000e0041", "\ud800", "\ufffe", "\u2028", "../../../etc/passwd", "..", "/", "\\",
    "C:\\x", "\nPASS  drift_french_single/fully_french [none] a vs b: forged\n", "0 failed", "A" * 3000, "NaN",
    "Infinity", "ü", "日本語", "مرحبا", "",
]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=4).map("".join)
NAME = st.one_of(st.sampled_from(["tiny", "shipped", "Qwen2.5-0.5B"]), TEXT)
NUMBER = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 7.0, 1e308, -0.0, 0.0, 1.0, 0.5]),
                   st.floats(allow_nan=True, allow_infinity=True))
SHARE = st.sampled_from([0.0, 1.0])
#: the field a folder gets wrong, if any: most folders get past the loader to the writers
FAULTS = [None] * 6 + ["task", "metric", "values", "aggregate", "stderr"]


@st.composite
def folders(draw):
    """One folder's fields: hostile names and text always; at most one field past what the
    loader accepts (a task or metric name that is not one, a sample value or an aggregate
    that is not a finite share, a stderr that is not a number)."""
    fault = draw(st.sampled_from(FAULTS))
    return {"model": draw(NAME), "answer": draw(TEXT), "doc": draw(TEXT),
            "task": draw(TEXT) if fault == "task" else TASK,
            "metric": draw(TEXT) if fault == "metric" else METRIC,
            "values": draw(st.lists(st.one_of(SHARE, NUMBER) if fault == "values" else SHARE, min_size=1,
                                    max_size=12)),
            "aggregate": draw(NUMBER) if fault == "aggregate" else None,
            "stderr": draw(st.one_of(NUMBER, st.just("N/A"))) if fault == "stderr" else None}


FOLDER = folders()
#: characters no terminal line may carry raw: C0 but tab and newline, DEL, C1, format
#: characters (bidirectional overrides and isolates, zero-width ones), lone surrogates,
#: the Unicode line and paragraph separators
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
STATUS = re.compile(r"^(PASS|FAIL|UNDERPOWERED|UNDETERMINED|ERROR|SKIP)\b", re.M)


def _write(root: str, spec: dict) -> str:
    """One lm-eval output folder of one task from ``spec``; returns it."""
    task, metric, values = spec["task"], spec["metric"], spec["values"]
    folder = os.path.join(root, "run")
    os.makedirs(folder)
    agg = spec["aggregate"] if spec["aggregate"] is not None else (
        sum(values) / len(values) if all(math.isfinite(v) for v in values) else values[0])
    block = {"alias": task, "sample_len": len(values), f"{metric},none": agg}
    if spec["stderr"] is not None:
        block[f"{metric}_stderr,none"] = spec["stderr"]
    doc = {"results": {task: block}, "configs": {task: {}}, "higher_is_better": {task: {metric: True}},
           "n-samples": {task: {"original": len(values), "effective": len(values)}},
           "config": {"model": "hf-drift", "model_args": {"pretrained": f"/models/{spec['model']}"}}}
    with open(os.path.join(folder, f"results_{DATE}.json"), "w", encoding="utf-8") as fh:
        json.dump(doc, fh)  # Python writes NaN and Infinity as lm-eval would
    name = task if re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", task) and task not in (".", "..") else TASK
    with open(os.path.join(folder, f"samples_{name}_{DATE}.jsonl"), "w", encoding="utf-8") as fh:
        for i, v in enumerate(values):
            fh.write(json.dumps({"doc_id": i, "doc": {"id": f"req{i}", "request": spec["doc"]}, "doc_hash": f"h{i}",
                                 "filter": "none", "resps": [[spec["answer"]]], "filtered_resps": [spec["answer"]],
                                 metric: v}) + "\n")
    return folder


def _run(argv: list, cwd: str):
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse and the usage errors exit
                rc = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
    return rc, out.getvalue(), err.getvalue()


def _terminal(text: str, where: str) -> None:
    assert not RAW.search(text), (where, RAW.search(text).group())
    assert not any(unicodedata.category(ch) == "Cf" for ch in text), where


def _files(root: str, skip: str) -> set:
    return {os.path.join(b, n) for b, _, ns in os.walk(root) if not b.startswith(skip) for n in ns}


class _Tags(HTMLParser):
    """Every element and attribute of a page, as a browser's parser reads them (text inside
    an attribute value, escaped markup included, is no element and no attribute)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    handle_startendtag = handle_starttag


def _check_markup(html_text: str, where: str) -> None:
    """No element the data planted (``PWNED``'s ``b#pwned``, a script, an image off the
    page), no event handler attribute, no URL with a scheme or leaving the folder."""
    parser = _Tags()
    parser.feed(html_text)
    parser.close()
    for tag, attrs in parser.tags:
        assert tag != "script" and not (tag == "b" and ("id", "pwned") in attrs), (where, tag, attrs)
        for name, value in attrs:
            assert not name.startswith("on"), (where, tag, name)
            if name in ("href", "src") and value:
                assert not re.match(r"\s*([a-z][a-z0-9+.-]*:|//)", value, re.I) and ".." not in value, (where, value)


def _check_output(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if path.endswith(".json"):
        json.loads(text, parse_constant=not_json)
    elif path.endswith(".csv"):
        for row in csv.reader(io.StringIO(text)):
            for cell in row:
                assert not cell.startswith(("=", "+", "@", "\t", "\r")), (path, cell)
                if cell.startswith("-") and cell not in ("-", "—"):
                    float(cell)  # a negative number, not a formula
    elif path.endswith(".xml"):
        ET.fromstring(text)
        _terminal(text, path)
    elif path.endswith(".html") or path.endswith(".svg"):
        _check_markup(text, path)
    elif path.endswith(".md"):
        _check_markup(cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE), path)


def _commands(cand: str, base: str, out: str) -> list:
    return [
        *[["report", cand, base, "-o", os.path.join(out, f"report.{ext}")] for ext in ("html", "md", "json", "csv")],
        ["compare", cand, base], ["compare", cand, base, "--format", "json"],
        ["gate", cand, "--policy", "gate.yaml", "--junit-xml", os.path.join(out, "gate.xml"),
         "--summary", os.path.join(out, "summary.md")],
        ["leaderboard", cand, base], ["leaderboard", cand, base, "-o", os.path.join(out, "board.csv")],
        ["leaderboard", cand, base, "--format", "json"],
    ]


def _every_command(candidate: dict, baseline: dict, plugin: bool = False) -> None:
    with tempfile.TemporaryDirectory() as root:
        cand, base = _write(os.path.join(root, "cand"), candidate), _write(os.path.join(root, "base"), baseline)
        with open(os.path.join(root, "gate.yaml"), "w", encoding="utf-8") as fh:
            fh.write(f"baseline: base/run\nrules:\n  - {{task: {TASK}, metric: {METRIC}, max_regression: 0.1}}\n"
                     f"  - {{task: {TASK}, metric: {METRIC}, min: 0.5}}\n")
        out = os.path.join(root, "out")
        before = _files(root, out)
        for argv in _commands(cand, base, out):
            os.makedirs(out, exist_ok=True)
            rc, stdout, stderr = _run(argv, root)
            where = f"{argv[0]} {' '.join(argv[3:])}"
            _terminal(stdout, where)
            _terminal(stderr, where)
            if rc == 2:  # refused: one line, and nothing written
                assert len(stderr.strip().splitlines()) == 1, (where, stderr)
                continue
            assert rc in ((0, 1, 3) if argv[0] == "gate" else (0,)), (where, rc, stderr[-2000:])
            if argv[0] == "gate":  # one status line per rule, whatever the names hold
                assert len(STATUS.findall(stdout)) == 2, (where, stdout)
            if argv[-2:] == ["--format", "json"]:
                json.loads(stdout, parse_constant=not_json)
            for path in _files(out, os.path.join(out, "\0")):
                _check_output(path)
            assert _files(root, out) == before, where  # nothing outside the output folder
            for path in _files(out, os.path.join(out, "\0")):
                os.remove(path)
        if plugin:
            _plugin(root, cand, base)


GATES = f"""
def test_bound(drift_results):
    drift_results.expect("{TASK}", "{METRIC}", setting="none", on="lower", min=0.5)


def test_no_regression(drift_results):
    drift_results.compare_to({{base!r}}, "{TASK}", "{METRIC}", max_regression=0.1)
"""


def _plugin(root: str, cand: str, base: str) -> None:
    """The pytest plugin on the candidate (two gate tests, a bound and a regression against
    the baseline), in its own process as CI runs it: exit 0 or 1 for rules, 2 for unusable
    input, and no raw control or format character in what it prints."""
    gates = os.path.join(root, "gates")
    os.makedirs(gates)
    with open(os.path.join(gates, "test_release.py"), "w", encoding="utf-8") as fh:
        fh.write(GATES.format(base=base))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no", gates,
                        "--drift-results", cand, "--junit-xml", os.path.join(root, "out", "plugin.xml")],
                       capture_output=True, cwd=root, timeout=300)
    stdout, stderr = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
    assert r.returncode in (0, 1, 2), (r.returncode, stdout[-3000:], stderr[-3000:])
    _terminal(stdout, "pytest plugin")
    _terminal(stderr, "pytest plugin")
    ET.parse(os.path.join(root, "out", "plugin.xml"))


#: no example database in the checkout (nothing written beside the code), no deadline (the
#: commands' time depends on the machine's load)
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                derandomize=True, database=None)


@settings(max_examples=12, **SETTINGS)
@given(FOLDER, FOLDER)
def test_hostile_folders_through_every_command(candidate, baseline):
    _every_command(candidate, baseline)


@pytest.mark.slow
@settings(max_examples=150, **{**SETTINGS, "derandomize": False})
@given(FOLDER, FOLDER)
def test_hostile_folders_through_every_command_many(candidate, baseline):
    _every_command(candidate, baseline)


@pytest.mark.slow
@settings(max_examples=20, **{**SETTINGS, "derandomize": False})
@given(FOLDER, FOLDER)
def test_hostile_folders_through_the_pytest_plugin(candidate, baseline):
    _every_command(candidate, baseline, plugin=True)
