"""drift-eval report: HTML and Markdown from Jinja templates, inline SVG, escaped excerpts,
checked in headless Chromium (screenshot kept as a test artefact)."""
import os
import re
import shutil
import subprocess

import pytest

from handmade_results import INJECTED, write_output


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    return write_output(tmp_path_factory.mktemp("report") / "out")


def _report(capsys, *args):
    from drift_eval.cli import main

    rc = main(["report", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_context_has_known_comparisons_costs_and_curves(handmade):
    from drift_eval.reports.render import build_context
    from drift_eval.decide.results import load_output

    ctx = build_context(load_output(handmade))
    by = {s["label"]: s for s in ctx["settings"]}
    assert list(by) == ["none", "const:0.25", "log:0.25"]
    rows = {(r["task"], r["metric"]): r["d"] for r in by["log:0.25"]["comparisons"]}
    ff = rows[("drift_french_single", "fully_french")]
    assert ff.difference == pytest.approx(0.5) and ff.verdict == "significant" and ff.test == "exact McNemar"
    assert rows[("drift_french_multiturn", "mean_words")].test == "paired permutation"
    assert {(r["task"], r["metric"]): r["d"].verdict for r in by["const:0.25"]["comparisons"]}[
        ("drift_french_single", "fully_french")] == "trend"
    assert by["log:0.25"]["ppl"]["cost"] == pytest.approx(0.10) and by["const:0.25"]["ppl"]["cost"] == pytest.approx(0.25)
    assert by["none"]["headline"]["value"] == pytest.approx(10 / 24)  # 10 answers + 0 conversations
    titles = [p["title"] for p in ctx["plots"]]
    assert "drift_french_multiturn: French rate per turn" in titles and "drift_alpha_detail: α by layer" in titles
    assert len(ctx["profile_plots"]) == 6  # per setting: all positions, and without position 0
    tables = {t["task"]: [r["metric"] for r in t["rows"]] for t in by["none"]["tables"]}
    assert tables["accessibility"] == ["n50_m1", "slope"]  # unknown metrics shown generically
    assert "alpha_l00" not in tables["drift_alpha_detail"]  # per-layer values are the curve


def test_markdown_report_escapes_generated_text(handmade, tmp_path, capsys):
    rc, out, _ = _report(capsys, handmade, "-o", tmp_path / "r.md")
    assert rc == 0
    md = (tmp_path / "r.md").read_text()
    assert "| drift_french_single | fully_french ↑ | +0.5000 |" in md and "**significant**" in md and "*trend*" in md
    assert "<script" not in md and "&lt;script&gt;" in md
    assert "<svg" in md and "<i>en français</i>" not in md


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_html_report_renders_in_chromium_and_scripts_stay_inert(handmade, tmp_path, capsys):
    rc, out, _ = _report(capsys, handmade, "-o", tmp_path / "report.html")
    assert rc == 0 and out.strip() == str(tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    assert "<script" not in html and "&lt;script&gt;" in html  # autoescaped
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no external assets
    assert html.count("<svg") == 2 + 6  # turn curve, alpha curve, profiles

    browser = _chromium()
    if browser is None:
        if os.environ.get("DRIFT_ALLOW_NO_BROWSER") == "1":
            pytest.skip("chromium not installed and DRIFT_ALLOW_NO_BROWSER=1")
        pytest.fail("chromium is not installed (setup.sh installs it); set DRIFT_ALLOW_NO_BROWSER=1 to skip this check")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=" + str(tmp_path / "prof")]
    url = (tmp_path / "report.html").as_uri()
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1200,2400", url],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 20_000
    if os.environ.get("DRIFT_TEST_ARTIFACTS"):
        os.makedirs(os.environ["DRIFT_TEST_ARTIFACTS"], exist_ok=True)
        shutil.copy(shot, os.path.join(os.environ["DRIFT_TEST_ARTIFACTS"], "report.png"))
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert "<title>Drift comparison report</title>" in dom and '<b id="pwned">' not in dom
    assert "&lt;script&gt;document.title='PWNED'" in dom  # shown as text
    assert dom.count("<svg") == 8 and "drift_french_multiturn: French rate per turn" in dom

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
    rc, _, err = _report(capsys, real_sweep["dir"], "-o", tmp_path / "real.pdf")
    assert rc == 2 and "end it in .html or .md" in err
