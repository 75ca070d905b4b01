"""drift-eval report: sections from Jinja templates, SVG plots (inline in HTML, files beside
Markdown), survival curves, audit strips, candidate vs baseline, gate verdict, JSON/CSV
export, escaped excerpts; checked in headless Chromium (screenshot kept as a test artefact)."""
import csv
import io
import json
import os
import re
import shutil
import subprocess

import pytest

from handmade_results import INJECTED, write_output
from helpers import png_pixels


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    return write_output(tmp_path_factory.mktemp("report") / "out")


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Two models x two settings in one folder; ``worse`` is French on 4 fewer documents."""
    root = tmp_path_factory.mktemp("two") / "out"
    write_output(root, settings=("none", "log:0.25"), model="good")
    write_output(root, settings=("none", "log:0.25"), model="worse", french_shift=4)
    return root


def _report(capsys, *args):
    from drift_eval.cli import main

    rc = main(["report", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _sections(ctx):
    return {s["id"]: s for s in ctx["sections"]}


def test_context_has_known_comparisons_costs_and_curves(handmade):
    from drift_eval.decide.results import load_output
    from drift_eval.reports.render import build_context

    ctx = build_context(load_output(handmade))
    sec = _sections(ctx)
    assert [s["id"] for s in ctx["sections"]] == ["verdict", "survival", "provenance", "summary", "curves",
                                                  "settings", "runs", "audit", "profiles"]
    blocks = {b["title"]: {(r["task"], r["metric"]): r["d"] for r in b["rows"]} for b in sec["settings"]["blocks"]}
    ff = blocks["log:0.25 − none"][("drift_french_single", "fully_french")]
    assert ff.difference == pytest.approx(0.5) and ff.verdict == "significant" and ff.test == "exact McNemar"
    assert blocks["log:0.25 − none"][("drift_french_multiturn", "mean_words")].test == "paired permutation"
    assert blocks["const:0.25 − none"][("drift_french_single", "fully_french")].verdict == "trend"
    summary = {r["run"]: r for r in sec["summary"]["rows"]}
    assert summary["log:0.25"]["ppl"]["cost"] == pytest.approx(0.10)
    assert summary["const:0.25"]["ppl"]["cost"] == pytest.approx(0.25)
    assert sec["summary"]["columns"][0] == "drift_french/drift_score"
    assert summary["none"]["cells"][0]["value"] == pytest.approx(10 / 24)  # 10 answers + 0 conversations
    titles = [p["title"] for p in ctx["plots"]]
    assert "drift_french_single: share of answers still French, by segment" in titles
    assert "drift_french_multiturn: French rate per turn" in titles and "drift_alpha_detail: α by layer" in titles
    assert len(sec["profiles"]["plots"]) == 6  # per setting: all positions, and without position 0
    tables = {t["task"]: [r["metric"] for r in t["rows"]] for t in sec["runs"]["blocks"][0]["tables"]}
    assert tables["accessibility"] == ["n50_m1", "slope"]  # unknown metrics shown generically
    assert "alpha_l00" not in tables["drift_alpha_detail"]  # per-layer values are the curve
    assert sec["verdict"]["gate"] is None and sec["verdict"]["one_line"][0][1].startswith(
        "tiny; revision main; lm-eval 0.4.13; git abc1234; 2026-01-01 00:00 UTC")


def test_survival_curve_and_audit_strip_from_the_timelines(handmade):
    from drift_eval.decide.results import load_output
    from drift_eval.reports.render import build_context

    ctx = build_context(load_output(handmade))
    surv = {(r["setting"], r["segment"], r["statistic"]): r["value"] for r in ctx["records"]
            if r["section"] == "survival"}
    # none: docs 10-19 drift; doc 10 at once, the rest at segment d % 3 (0-based)
    # -> leaving at segment 1: docs 12, 15, 18 and 10; at 2: 13, 16, 19; at 3: 11, 14, 17
    assert [surv[("none", k, "value")] for k in (1, 2, 3, 4)] == pytest.approx([0.8, 0.65, 0.5, 0.5])
    assert surv[("log:0.25", 4, "value")] == 1.0 and surv[("none", 1, "lower")] < 0.8 < surv[("none", 1, "upper")]
    audit = _sections(ctx)["audit"]["blocks"][0]
    assert audit["title"] == "drift_french_single [none]: segment languages"
    assert [r["onset"] for r in audit["rows"][:5]] == [0, 0, 0, 0, 1]  # sorted by drift onset
    doc10 = next(r for r in audit["rows"] if r["doc_id"] == 10)
    assert INJECTED in doc10["excerpt"]  # the text where it left French (escaped when rendered)
    assert "<title>segment 1: en, fastText probability 0.90</title>" in str(doc10["svg"])


def test_markdown_report_links_separate_svg_files_and_escapes_text(handmade, tmp_path, capsys):
    rc, out, _ = _report(capsys, handmade, "-o", tmp_path / "r.md")
    assert rc == 0
    md = (tmp_path / "r.md").read_text()
    assert "| drift_french_single | fully_french ↑ | +0.5000 |" in md and "**significant**" in md and "*trend*" in md
    assert "<script" not in md and "&lt;script&gt;" in md
    assert "<svg" not in md and "<i>en français</i>" not in md  # GitHub strips inline SVG: files instead
    links = re.findall(r"!\[(?:\\.|[^\]\\])*\]\((r-plots/[^)]+\.svg)\)", md)
    assert len(links) == len(os.listdir(tmp_path / "r-plots")) >= 10
    for link in links:
        assert (tmp_path / link).read_text().startswith("<svg")
    (tmp_path / "r-plots" / "99-stale.svg").write_text("<svg/>")
    _report(capsys, handmade, "-o", tmp_path / "r.md")
    assert not (tmp_path / "r-plots" / "99-stale.svg").exists()


def test_json_and_csv_exports_carry_the_numbers_of_the_page(handmade, tmp_path, capsys):
    rc, _, _ = _report(capsys, handmade, "-o", tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    rc2, _, _ = _report(capsys, handmade, "-o", tmp_path / "r.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert rc == rc2 == 0 and len(rows) == len(doc["records"]) > 500
    sections = {r["section"] for r in doc["records"]}
    assert sections == {"survival", "summary", "curves", "settings", "runs", "audit", "profiles"}
    [lower] = [r["value"] for r in doc["records"] if r["section"] == "runs" and r["setting"] == "none"
               and r["task"] == "drift_french_single" and r["metric"] == "fully_french" and r["statistic"] == "lower"]
    assert lower == pytest.approx(0.2993, abs=1e-4)  # Wilson 10/20, as the page shows it
    html_numbers = {f"{r['value']:.4f}" for r in doc["records"] if r["section"] == "runs"
                    and isinstance(r["value"], float)}
    _report(capsys, handmade, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert all(n in page for n in html_numbers)


def test_two_models_with_baseline_and_policy(two_models, tmp_path, capsys):
    from drift_eval.decide.results import load_output
    from drift_eval.reports.render import build_context

    policy = tmp_path / "gate.yaml"
    policy.write_text("baseline: good\nrules:\n"
                      "  - {task: drift_french_single, metric: fully_french, max_regression: 0.05, on: upper}\n")
    ctx = build_context(load_output(two_models), policy=str(policy))
    sec = _sections(ctx)
    assert ctx["runs"] == ["good [none]", "good [log:0.25]", "worse [none]", "worse [log:0.25]"]
    assert sec["verdict"]["gate"]["status"] == "UNDERPOWERED"  # 4 of 20 flipped: too few documents to resolve 0.05
    rows = {(r["setting"], r["task"], r["metric"]): r for r in sec["verdict"]["headline"]}
    head = rows[("none", "drift_french", "drift_score")]
    assert head["c"].candidate == "worse" and head["c"].baseline == "good"
    # 4 of 24 documents flipped one way: exact McNemar p = 2/16, not significant, and too few to tell
    assert head["d"].difference == pytest.approx(-4 / 24) and head["d"].p_value == pytest.approx(0.125)
    assert head["reading"] == "no significant difference" and head["underpowered"]
    assert [r["metric"] for r in sec["baseline"]["rows"] if r["task"] == "drift_french_single"][:2] == [
        "fully_french", "french_fraction"]
    rc, _, err = _report(capsys, two_models, "-o", tmp_path / "x.html", "--baseline", "nobody")
    assert rc == 2 and "baseline 'nobody' is neither a results folder nor a model" in err


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_html_report_renders_in_chromium_and_scripts_stay_inert(two_models, tmp_path, capsys):
    policy = tmp_path / "gate.yaml"
    policy.write_text("baseline: good\nrules:\n"
                      "  - {task: drift_french_single, metric: fully_french, max_regression: 0.05, on: upper}\n"
                      "  - {task: drift_french_single, metric: echo_rate, setting: all, max: 0.1}\n")
    page = tmp_path / "report.html"
    rc, out, _ = _report(capsys, two_models, "-o", page, "--policy", policy)
    assert rc == 0 and out.strip() == str(page)
    html = page.read_text()
    assert "<script" not in html and "&lt;script&gt;" in html  # autoescaped
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no external assets

    browser = _chromium()
    if browser is None:
        if os.environ.get("DRIFT_ALLOW_NO_BROWSER") == "1":
            pytest.skip("chromium not installed and DRIFT_ALLOW_NO_BROWSER=1")
        pytest.fail("chromium is not installed (setup.sh installs it); set DRIFT_ALLOW_NO_BROWSER=1 to skip this check")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=" + str(tmp_path / "prof")]
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert "<title>Drift comparison report</title>" in dom and '<b id="pwned">' not in dom
    assert "&lt;script&gt;document.title='PWNED'" in dom  # shown as text, in an excerpt and in the audit strip
    assert 'id="gate-verdict">Gate: UNDERPOWERED' in dom
    assert "good [none]" in dom and "worse [log:0.25]" in dom
    assert "drift_french_single: share of answers still French, by segment" in dom
    # the first screen (1280 x 1000) shows the verdict and the survival curves: the verdict's
    # badge colour and the survival bands' shading (15% of the first two series' colours on white)
    shot = tmp_path / "first-screen.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1280,1000", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    pixels = png_pixels(shot)
    assert pixels.count((0xff, 0xf3, 0xcd)) > 1000  # the UNDERPOWERED badge

    def shade(rgb):
        return tuple(round(255 * 0.85 + c * 0.15) for c in rgb)

    for colour in ((0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28)):
        near = sum(1 for p in pixels if all(abs(a - b) <= 3 for a, b in zip(p, shade(colour))))
        assert near > 500, colour
    if os.environ.get("DRIFT_TEST_ARTIFACTS"):
        os.makedirs(os.environ["DRIFT_TEST_ARTIFACTS"], exist_ok=True)
        shutil.copy(shot, os.path.join(os.environ["DRIFT_TEST_ARTIFACTS"], "report.png"))

    # the check can see an executed script: the same text unescaped, in a page without the CSP
    control = tmp_path / "control.html"
    control.write_text(f"<html><head><title>Drift comparison report</title></head><body>{INJECTED}</body></html>")
    dom = subprocess.run([browser, *flags, "--dump-dom", control.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert '<b id="pwned">x</b>' in dom and "<title>PWNED</title>" in dom


@pytest.mark.slow
def test_report_on_real_sweep_has_profiles_and_comparison(real_sweep, tmp_path, capsys):
    rc, _, _ = _report(capsys, real_sweep["dir"], "-o", tmp_path / "real.html")
    html = (tmp_path / "real.html").read_text()
    assert rc == 0 and "log:1 − none" in html
    assert "position_bias [none]: influence profiles" in html and "position_bias [log:1]" in html
    assert "drift_french_multiturn_fixed" in html
    assert "drift_french_single: share of answers still French, by segment" in html
    assert "SmolLM2-135M-Instruct.Q4_1" in html and "forced to 16 tokens" in html
    rc, _, err = _report(capsys, real_sweep["dir"], "-o", tmp_path / "real.pdf")
    assert rc == 2 and "end it in .html, .md, .json or .csv" in err


def test_provenance_of_a_run_spans_every_results_file(tmp_path):
    """A model and setting whose tasks ran at different times (two results files) keep both
    files' code versions and both tasks' generation lengths in the provenance."""
    import json

    from drift_eval.decide.results import load_output
    from handmade_results import write_task_run

    for root, task, gen, git in (("a", "drift_french_single", {"max_gen_toks": 2048, "min_new_tokens": 2048}, "aaa111"),
                                 ("b", "drift_french_multiturn", {"max_gen_toks": 512}, "bbb222")):
        write_task_run(tmp_path / root / "none", "tiny", [1, 0, 1], task=task,
                       metric="fully_french" if task.endswith("single") else "last3_french",
                       date=f"2026-02-0{1 if root == 'a' else 2}T00-00-00.000000")
        path = next((tmp_path / root / "none" / "tiny").glob("results_*.json"))
        doc = json.loads(path.read_text())
        doc["configs"][task] = {"generation_kwargs": gen}
        doc["git_hash"] = git
        path.write_text(json.dumps(doc))
    out = load_output(str(tmp_path / "a"), str(tmp_path / "b"))
    (run,) = out.ordered_runs()
    assert run.provenance["git_hash"] == "aaa111 / bbb222"
    assert run.provenance["length"] == ("drift_french_single: forced to 2048 tokens; "
                                        "drift_french_multiturn: natural, at most 512 tokens")


def test_line_plot_legend_column_fits_the_longest_series_name():
    from drift_eval.reports.svg import LEGEND_CHAR_PX, line_plot

    def width(svg):
        return int(re.search(r'<svg[^>]* width="(\d+)"', str(svg)).group(1))

    short = line_plot({"a": [(0, 1), (1, 2)]}, "t", "x", "y")
    assert width(short) == 600  # the default picture: names up to 15 characters fit the 150 px column
    name = "SmolLM2-135M-Instruct.Q4_1 [const:0.25]"  # 39 characters
    svg = str(line_plot({name: [(0, 1), (1, 2)]}, "t", "x", "y"))
    # plot area 600 - 58 - 150 = 392 px; the legend column: 40 px + 7 px a character
    assert width(svg) == 58 + 392 + 40 + LEGEND_CHAR_PX * len(name) == 763
    x = float(re.search(r'<text x="([\d.]+)"[^>]*>' + re.escape(name), svg).group(1))
    assert x + LEGEND_CHAR_PX * len(name) <= width(svg)
