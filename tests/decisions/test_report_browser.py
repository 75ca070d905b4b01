"""drift-eval report in a real browser (headless Chromium): the HTML page renders, its plots and
tables fit, scripts planted in the results stay inert, and the languages heat map shows its
labels."""
import html as markup
import json
import os
import re
import shutil
import subprocess

import pytest

from support.checks import run_cli
from support.handmade_results import INJECTED, write_output
from support.images import png_pixels
from support.places import REPO


@pytest.fixture
def headless(chromium, tmp_path):
    """Chromium and its headless flags, with a profile of the test's own."""
    return chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                      "--user-data-dir=" + str(tmp_path / "prof")]


#: the tail of a long model name (a GGUF file converted into a cache folder keeps its name and key)
LONG_NAME = "SmolLM2-135M-Instruct.Q4_1-0932cb8f3d829473-converted-from-gguf-to-safetensors"

#: written into a copy of the page: where things are, at the window's size
LAYOUT_SCRIPT = """<script>
const box = (e) => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, right: r.right}; };
const root = document.documentElement;
const layout = {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, height: root.scrollHeight,
                firstTable: document.querySelector("section table").closest("section").id,
                headline: box(document.querySelector("#headline table.headline")),
                badge: box(document.querySelector("#gate-verdict"))};
const pre = document.createElement("pre");
pre.id = "layout";
pre.textContent = JSON.stringify(layout);
document.body.appendChild(pre);
</script>"""


def _layout(browser, flags, html, path):
    """The layout of ``html`` at 1280 x 800, measured in Chromium (``LAYOUT_SCRIPT``)."""
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace("</body>",
                                                                                          LAYOUT_SCRIPT + "</body>")
    path.write_text(page)
    dom = subprocess.run([browser, *flags, "--window-size=1280,800", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom)
    assert found, dom[-2000:]
    return json.loads(markup.unescape(found.group(1)))


@pytest.mark.slow
def test_html_report_renders_in_chromium_and_scripts_stay_inert(headless, tmp_path, capsys):
    """Two models with long names (a converted checkpoint's folder name, 70 characters and
    more) x two settings, a baseline and a policy."""
    good, worse = f"good-{LONG_NAME}", f"worse-{LONG_NAME}"
    results = tmp_path / "out"
    write_output(results, settings=("none", "log:0.25"), model=good)
    write_output(results, settings=("none", "log:0.25"), model=worse, french_shift=4)
    policy = tmp_path / "gate.yaml"
    policy.write_text(f"baseline: {good}\nrules:\n"
                      "  - {task: drift_french_single, metric: fully_french, max_regression: 0.05, on: upper}\n"
                      "  - {task: drift_french_single, metric: echo_rate, setting: all, max: 0.1}\n")
    page = tmp_path / "report.html"
    rc, out, _ = run_cli(capsys, "report", results, "-o", page, "--policy", policy)
    assert rc == 0 and out.strip() == str(page)
    html = page.read_text()
    assert "<script" not in html and "&lt;script&gt;" in html  # autoescaped
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no external assets

    browser, flags = headless
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert "<title>Drift comparison report</title>" in dom and '<b id="pwned">' not in dom
    assert "&lt;script&gt;document.title='PWNED'" in dom  # shown as text, in an excerpt and in the audit strip
    assert 'id="gate-verdict">Gate: UNDERPOWERED' in dom
    assert f"{good} [none]" in dom and f"{worse} [log:0.25]" in dom
    assert "drift_french_single: share of answers still in French, by segment" in dom
    # the page fits a 1280-pixel-wide screen and its first 800 px hold the headline table: measured in
    # copies of the page without their CSP, a script writing the layout into the DOM that --dump-dom
    # returns; once as it opens, once with every <details> unfolded
    layout = _layout(browser, flags, html, tmp_path / "measured.html")
    assert layout["clientWidth"] == 1280 and layout["scrollWidth"] <= 1280, layout
    assert layout["firstTable"] == "headline" and 0 < layout["headline"]["top"] < layout["headline"]["bottom"] <= 800
    assert layout["headline"]["right"] <= 1280 and layout["badge"]["bottom"] <= layout["headline"]["top"]
    unfolded = _layout(browser, flags, html.replace("<details", "<details open"), tmp_path / "unfolded.html")
    assert unfolded["scrollWidth"] <= 1280 and unfolded["height"] > layout["height"], unfolded
    # the first screen as a reader sees it: the UNDERPOWERED badge and the headline table's header cells
    shot = tmp_path / "first-screen.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1280,800", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    pixels = png_pixels(shot)
    assert len(pixels) == 1280 * 800
    assert pixels.count((0xff, 0xf3, 0xcd)) > 1000  # the UNDERPOWERED badge
    assert pixels.count((0xf3, 0xf3, 0xf3)) > 20000  # the header row of the headline tables
    if os.environ.get("DRIFT_TEST_ARTIFACTS"):
        os.makedirs(os.environ["DRIFT_TEST_ARTIFACTS"], exist_ok=True)
        shutil.copy(shot, os.path.join(os.environ["DRIFT_TEST_ARTIFACTS"], "report.png"))
    # the survival panels (the section alone on the screen): both settings' bands, 15% of their colours on white
    panels = tmp_path / "survival.html"
    panels.write_text(html.replace("</head>", "<style>section:not(#survival){display:none}</style></head>"))
    shot = tmp_path / "survival.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1280,800", panels.as_uri()],
                   capture_output=True, timeout=120, check=True)
    pixels = png_pixels(shot)

    def shade(rgb):
        return tuple(round(255 * 0.85 + c * 0.15) for c in rgb)

    for colour in ((0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28)):
        near = sum(1 for p in pixels if all(abs(a - b) <= 3 for a, b in zip(p, shade(colour))))
        assert near > 500, colour
    if os.environ.get("DRIFT_TEST_ARTIFACTS"):
        shutil.copy(shot, os.path.join(os.environ["DRIFT_TEST_ARTIFACTS"], "report-survival.png"))

    # the check can see an executed script: the same text unescaped, in a page without the CSP
    control = tmp_path / "control.html"
    control.write_text(f"<html><head><title>Drift comparison report</title></head><body>{INJECTED}</body></html>")
    dom = subprocess.run([browser, *flags, "--dump-dom", control.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert '<b id="pwned">x</b>' in dom and "<title>PWNED</title>" in dom


@pytest.mark.slow
def test_the_languages_heat_map_shows_its_labels_in_chromium(headless, tmp_path, capsys):
    """The Languages section's heat map, on committed real runs of two models in two
    languages, as Chromium renders it: its title, its row labels (language and code) and its
    column labels (model and setting) are the SVG's text, read from the rendered DOM."""
    base = os.path.join(REPO, "docs", "results", "languages")
    folders = [os.path.join(base, f"{model}_single", lang) for model in ("smollm2", "qwen") for lang in ("ar", "ja")]
    page = tmp_path / "languages.html"
    rc, _, err = run_cli(capsys, "report", *folders, "-o", page)
    assert rc == 0, err
    browser, flags = headless
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    maps = [m for m in re.findall(r"<svg[^>]*>.*?</svg>", dom, re.S) if "by language and run" in m]
    assert len(maps) == 1, len(maps)
    texts = [markup.unescape(t).strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", maps[0])]
    assert texts[0] == "fully_target by language and run"
    assert "Arabic (ar)" in texts and "Japanese (ja)" in texts
    assert "SmolLM2-135M-Instruct.Q4_1 [none]" in texts and "qwen2.5-coder-0.5b-instruct-q4_k_m [none]" in texts
    assert all(texts), texts  # no empty label
    cells = [t for t in texts if re.fullmatch(r"\d\.\d\d|—", t)]
    assert len(cells) == 4  # two languages x two runs, each with its value written in it
