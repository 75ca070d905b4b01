"""drift-eval report: sections from Jinja templates, SVG plots (inline in HTML, files beside
Markdown), survival curves, audit strips, candidate vs baseline, gate verdict, JSON/CSV
export, escaped excerpts; checked in headless Chromium (screenshot kept as a test artefact)."""
import csv
import io
import json
import os
import re

import pytest
from cmarkgfm.cmark import Options

from drift_eval.reports import text

from drift_eval.catalogue import series
from drift_eval.decide.results import load_output
from drift_eval.metrics import power, stats
from drift_eval.reports.render import build_context, render
from drift_eval.reports.svg import LEGEND_CHAR_PX, heat_map, line_plot
from drift_eval.tasks import metric_catalogue, task_info
from support.checks import code_strings, run_cli
from support.handmade_results import INJECTED, write_output, write_task_run
from support.places import REPO


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """Two models x two settings in one folder; ``worse`` is French on 4 fewer documents."""
    root = tmp_path_factory.mktemp("two") / "out"
    write_output(root, settings=("none", "log:0.25"), model="good")
    write_output(root, settings=("none", "log:0.25"), model="worse", french_shift=4)
    return root


def _sections(ctx):
    return {s["id"]: s for s in ctx["sections"]}


def test_context_has_known_comparisons_costs_and_curves(handmade):
    ctx = build_context(load_output(handmade))
    sec = _sections(ctx)
    assert [s["id"] for s in ctx["sections"]] == ["headline", "survival", "summary", "curves", "settings", "runs",
                                                  "audit", "profiles", "provenance"]  # no verdict without a policy
    blocks = {b["title"]: {(r["task"], r["metric"]): r for r in b["rows"]} for b in sec["settings"]["blocks"]}
    ff = blocks["log:0.25 − none"][("drift_french_single", "fully_french")]["d"]
    assert ff.difference == pytest.approx(0.5) and ff.verdict == "significant" and ff.test == "exact McNemar"
    assert blocks["log:0.25 − none"][("drift_french_multiturn", "mean_words")]["d"].test == "paired permutation"
    const = blocks["const:0.25 − none"][("drift_french_single", "fully_french")]
    assert const["d"].verdict == "not significant" and const["mde"] == "0.460"  # 2 of 20 discordant, as two-way background: power.mde_binary(20, 0.1)
    summary = {t["task"]: t for t in sec["summary"]["tables"]}
    assert list(summary)[:3] == ["drift_french", "drift_french_single", "drift_french_multiturn"]  # the group first
    costs = {r["run"]: r["cost"]["cost"] for r in summary["drift_ppl"]["rows"]}
    assert summary["drift_ppl"]["cost"] == "perplexity cost"  # from the YAML's cost panel, not a task name
    assert costs["log:0.25"] == pytest.approx(0.10) and costs["const:0.25"] == pytest.approx(0.25)
    assert summary["drift_french"]["columns"] == ["drift_score ↑"]
    assert summary["drift_french"]["rows"][0]["cells"][0]["value"] == pytest.approx(10 / 24)  # 10 answers + 0 conversations
    assert summary["drift_french_single"]["columns"] == ["fully_french ↑", "echo_rate ↓", "time_in_french ↑",
                                                         "not_kept_left ↓", "not_kept_degenerate ↓",
                                                         "not_kept_unreadable ↓"]
    titles = [p["title"] for p in ctx["plots"]]
    assert "drift_french_single: share of answers still in French, by segment" in titles
    assert "drift_french_multiturn: French rate by turn" in titles and "drift_alpha_detail: α by layer" in titles
    layers = {(r["setting"], r["metric"]): r["value"] for r in ctx["records"]
              if r["section"] == "curves" and r["task"] == "drift_alpha_detail" and r["statistic"] == "value"}
    assert layers[("log:0.25", "alpha_l03")] == pytest.approx(0.8)  # alpha + 0.1 * layer
    assert len(sec["profiles"]["plots"]) == 6  # per setting: all positions, and without position 0
    tables = {t["task"]: [r["metric"] for r in t["rows"]] for t in sec["runs"]["blocks"][0]["tables"]}
    assert tables["accessibility"] == ["n50_m1", "slope"]  # unknown metrics shown generically
    assert "alpha_l00" not in tables["drift_alpha_detail"]  # per-layer values are the curve
    assert ("model", "tiny") in sec["provenance"]["common"] and ("git", "abc1234") in sec["provenance"]["common"]
    assert ("date", "2026-01-01 00:00 UTC") in sec["provenance"]["common"] and sec["provenance"]["columns"] == []


def _bh_by_hand(ctx) -> dict:
    """Benjamini–Hochberg over every distinct comparison the report records, computed here
    from the raw p-values: the k-th smallest p times m / k, then the running minimum from the
    largest down. Also checks that the report recorded exactly these adjusted values."""
    raw, recorded = {}, {}
    for r in ctx["records"]:
        key = (r["model"], r["setting"], r["task"], r["metric"], r.get("against") or r.get("baseline"))
        if r["statistic"] == "p_value":
            raw[key] = r["value"]
        elif r["statistic"] == "p_adjusted":
            recorded[key] = r["value"]
    m = len(raw)
    order = sorted(raw, key=raw.get)
    out, running = {}, 1.0
    for k in range(m, 0, -1):
        running = min(running, raw[order[k - 1]] * m / k)
        out[order[k - 1]] = running
    assert ctx["family"] >= m and recorded == pytest.approx(out)
    return out


def test_headline_table_and_what_it_supports(handmade, tmp_path):
    """The first section: per family, model x setting -> each task's headline (the YAMLs'
    headline role) with its interval and its change against none; one reading per model."""
    ctx = build_context(load_output(handmade))
    tables = {t["family"]: t for t in _sections(ctx)["headline"]["tables"]}
    assert list(tables) == ["drift_french", "drift_alpha", "position_bias"]  # accessibility has no headline here
    french = tables["drift_french"]
    assert [(c["task"], c["metric"]) for c in french["columns"]] == [
        ("drift_french", "drift_score"), ("drift_french_single", "fully_french"),
        ("drift_french_multiturn", "last3_french")]
    rows = {r["setting"]: r for r in french["rows"]}
    assert rows["none"]["span"] == 3 and rows["log:0.25"]["span"] == 0  # one model cell over its settings
    single = rows["log:0.25"]["cells"][1]
    assert single["value"] == 1.0 and single["lower"] == pytest.approx(stats.wilson_interval(20, 20)[0])
    [change] = single["changes"]
    assert change["against"] == "none" and change["d"].difference == pytest.approx(0.5)
    assert change["d"].p_value == pytest.approx(2 / 1024) and change["significant"] and change["css"] == "significant"
    assert rows["none"]["cells"][1]["changes"] == []
    const = rows["const:0.25"]["cells"][1]["changes"][0]
    assert const["d"].p_value == pytest.approx(0.5) and not const["significant"] and const["css"] == "nodiff"
    assert const["mde"] == pytest.approx(power.mde_binary(20, 0.1))
    alpha = {r["setting"]: r for r in tables["drift_alpha"]["rows"]}["log:0.25"]["cells"][0]["changes"][0]
    assert alpha["d"].difference == pytest.approx(-0.4) and alpha["css"] == "significant"  # lower α is better
    # the group pools its tasks, so its headline alone is read: 14 and 6 of 24 documents flip, all to French
    [reading] = french["readings"]
    # const:0.25's raw p 0.031 does not survive the adjustment over the report's comparisons
    adjusted = _bh_by_hand(ctx)
    assert adjusted[("tiny", "const:0.25", "drift_french", "drift_score", "none")] > 0.05
    log = adjusted[("tiny", "log:0.25", "drift_french", "drift_score", "none")]
    assert reading["model"] == "tiny" and reading["sentences"] == [
        "Against none, drift_score (drift_french) changes significantly (adjusted p < 0.05) under log:0.25 by +0.58 "
        f"{_ci(ctx, 'log:0.25')} (p 0.00012, adjusted {text.pvalue(log)}); the other 1 change is not significant."]
    assert tables["position_bias"]["readings"][0]["sentences"] == [
        "The settings cannot be compared on these headlines: they have neither per-sample values nor standard "
        "errors."]
    recorded = {(r["setting"], r["task"], r["metric"], r["statistic"], r.get("against")): r["value"]
                for r in ctx["records"] if r["section"] == "headline"}
    assert recorded[("const:0.25", "drift_french_single", "fully_french", "mde", "none")] == pytest.approx(
        power.mde_binary(20, 0.1))
    assert recorded[("log:0.25", "drift_french_single", "fully_french", "value", None)] == 1.0
    # under the headline, the share not kept in full by first cause: all 20 answers kept under log:0.25
    assert recorded[("log:0.25", "drift_french_single", "not_kept_left", "value", None)] == 0.0

    # one task, two settings, nothing significant: the sentence says so, with what the sample can detect
    root = tmp_path / "one"
    write_task_run(root, "m", [1] * 5 + [0] * 5, setting="none")
    write_task_run(root, "m", [1] * 7 + [0] * 3, setting="log:0.25", date="2026-02-02T00-00-00.000000")
    ctx = build_context(load_output(str(root)))
    [table] = _sections(ctx)["headline"]["tables"]
    [sentence] = table["readings"][0]["sentences"]
    assert sentence.startswith("log:0.25 changes fully French (drift_french_single) by +0.20 [")
    # 2 of 10 documents disagree, taken as two-way background: no effect up to 0.8 reaches 80% power
    assert power.mde_binary(10, 0.2) == float("inf")
    # a family of one comparison: adjusting leaves its p as it is
    assert ctx["family"] == 1
    assert sentence.endswith("(p 0.5, adjusted 0.5) against none: not significant; this sample cannot reliably "
                             "detect a difference of any size (80% power).")
    html = render(load_output(str(root)), "html")
    assert html.index('id="headline"') < html.index("<table") and "Δ +0.20, p 0.5, adjusted 0.5" in html
    assert "0.70 [0.40, 0.89]" in html  # Wilson 7/10, as the headline shows it


def _ci(ctx, setting):
    [d] = [b for b in _sections(ctx)["settings"]["blocks"] if b["title"] == f"{setting} − none"]
    [row] = [r for r in d["rows"] if (r["task"], r["metric"]) == ("drift_french", "drift_score")]

    return f"[{text.short(row['d'].lower, True, 0.5)}, {text.short(row['d'].upper, True, 0.5)}]"


def test_survival_and_turn_curves_are_small_multiples(two_models, tmp_path):
    """Two models x two settings: one panel per model, its settings as lines, one colour per
    setting in both panels, the same axes."""
    ctx = build_context(load_output(two_models))
    [fig] = _sections(ctx)["survival"]["figures"]
    assert fig["title"] == "drift_french_single: share of answers still in French, by segment"
    assert [p["title"] for p in fig["plots"]] == [f"{fig['title']} [good]", f"{fig['title']} [worse]"]
    for p in fig["plots"]:
        svg = str(p["svg"])
        legend = re.findall(r'stroke="(#[0-9a-f]{6})" stroke-width="3"/><text[^>]*>([^<]+)</text>', svg)
        assert legend == [("#1f77b4", "none"), ("#d62728", "log:0.25")]
        assert re.search(r'<text x="[\d.]+" y="18"[^>]*>(good|worse)</text>', svg)
    turns = {f["title"]: f for f in _sections(ctx)["curves"]["figures"]}["drift_french_multiturn: French rate by turn"]
    assert len(turns["plots"]) == 2
    # two models with one setting each: panels would hold one line; one plot, a line per run, its legend below
    root = tmp_path / "each-one"
    write_output(root, settings=("none",), model="trained")
    write_output(root, settings=("none",), model="random-init-twin")
    [alpha] = [f for f in _sections(build_context(load_output(str(root))))["curves"]["figures"]
               if f["title"] == "drift_alpha_detail: α by layer"]
    [plot] = alpha["plots"]
    assert sorted(re.findall(r'<text x="(\d+)" y="\d+" font-size="12">([^<]+ \[none\])</text>', str(plot["svg"]))) \
        == [("80", "random-init-twin [none]"), ("80", "trained [none]")]  # left-aligned under the plot


def test_survival_curve_and_audit_strip_from_the_timelines(handmade):
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
    rc, out, _ = run_cli(capsys, "report", handmade, "-o", tmp_path / "r.md")
    assert rc == 0
    md = (tmp_path / "r.md").read_text()
    assert "| `drift_french_single` | `fully_french` ↑ | +0.5000 |" in md and "**significant**" in md and "*not significant*" in md
    assert "<svg" not in md  # GitHub strips inline SVG: files instead
    cmarkgfm = pytest.importorskip("cmarkgfm")

    page = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)  # raw HTML kept, if any
    assert "<script" not in page and "<i>" not in page and "&lt;script&gt;" in page  # answers stay text
    links = re.findall(r"!\[(?:\\.|[^\]\\])*\]\((r-plots/[^)]+\.svg)\)", md)
    assert len(links) == len(os.listdir(tmp_path / "r-plots")) >= 10
    for link in links:
        assert (tmp_path / link).read_text().startswith("<svg")
    (tmp_path / "r-plots" / "99-stale.svg").write_text("<svg/>")
    run_cli(capsys, "report", handmade, "-o", tmp_path / "r.md")
    assert not (tmp_path / "r-plots" / "99-stale.svg").exists()


def test_json_and_csv_exports_carry_the_numbers_of_the_page(handmade, tmp_path, capsys):
    rc, _, _ = run_cli(capsys, "report", handmade, "-o", tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    rc2, _, _ = run_cli(capsys, "report", handmade, "-o", tmp_path / "r.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert rc == rc2 == 0 and len(rows) == len(doc["records"]) > 500
    sections = {r["section"] for r in doc["records"]}
    assert sections == {"headline", "survival", "summary", "curves", "settings", "runs", "audit", "profiles"}
    [lower] = [r["value"] for r in doc["records"] if r["section"] == "runs" and r["setting"] == "none"
               and r["task"] == "drift_french_single" and r["metric"] == "fully_french" and r["statistic"] == "lower"]
    assert lower == pytest.approx(0.2993, abs=1e-4)  # Wilson 10/20, as the page shows it
    html_numbers = {f"{r['value']:.4f}" for r in doc["records"] if r["section"] == "runs"
                    and isinstance(r["value"], float)}
    run_cli(capsys, "report", handmade, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert all(n in page for n in html_numbers)


def test_two_models_with_baseline_and_policy(two_models, tmp_path, capsys):
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
    # the headline shows it too: the candidate's rows carry their change against the baseline, and the
    # candidate's reading says what the test supports, no more
    assert sec["headline"]["gate"]["status"] == "UNDERPOWERED" and sec["headline"]["gate"]["counts"] == {
        "UNDERPOWERED": 1}
    french = {t["family"]: t for t in sec["headline"]["tables"]}["drift_french"]
    cells = {(r["model"], r["setting"]): r["cells"][0] for r in french["rows"]}
    assert [c["against"] for c in cells[("worse", "log:0.25")]["changes"]] == ["none", "good"]
    vs = cells[("worse", "none")]["changes"][0]
    assert vs["against"] == "good" and vs["d"].difference == pytest.approx(-4 / 24) and not vs["significant"]
    assert vs["mde"] == head["c"].mde and cells[("good", "none")]["changes"] == []
    worse = next(r for r in french["readings"] if r["model"] == "worse")
    assert worse["sentences"][1].startswith(
        "Against the baseline good, drift_score (drift_french) differs significantly under no setting; the largest "
        "difference is under none, −0.17 [")
    adjusted = _bh_by_hand(ctx)[("worse", "none", "drift_french", "drift_score", "good")]
    assert head["d"].p_adjusted == pytest.approx(adjusted)
    assert worse["sentences"][1].endswith(f"(p 0.12, adjusted {text.pvalue(adjusted)}), and this sample detects "
                                          f"differences of about {head['c'].mde:.2f} or more (80% power).")
    assert [r["metric"] for r in sec["baseline"]["rows"] if r["task"] == "drift_french_single"][:2] == [
        "fully_french", "french_fraction"]
    rc, _, err = run_cli(capsys, "report", two_models, "-o", tmp_path / "x.html", "--baseline", "nobody")
    assert rc == 2 and "baseline 'nobody' is neither a results folder nor a model" in err


@pytest.mark.slow
def test_report_on_real_sweep_has_profiles_and_comparison(real_sweep, tmp_path, capsys):
    rc, _, _ = run_cli(capsys, "report", real_sweep["dir"], "-o", tmp_path / "real.html")
    html = (tmp_path / "real.html").read_text()
    assert rc == 0 and "log:1 − none" in html
    assert "position_bias [none]: influence profiles" in html and "position_bias [log:1]" in html
    assert "drift_french_multiturn_fixed" in html
    assert "drift_french_single: share of answers still in French, by segment" in html
    assert "SmolLM2-135M-Instruct.Q4_1" in html and "forced to 16 tokens" in html
    rc, _, err = run_cli(capsys, "report", real_sweep["dir"], "-o", tmp_path / "real.pdf")
    assert rc == 2 and "end it in .html, .md, .json or .csv" in err


def test_provenance_of_a_run_spans_every_results_file(tmp_path):
    """A model and setting whose tasks ran at different times (two results files) keep both
    files' code versions and both tasks' generation lengths in the provenance."""
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


def test_report_code_names_no_task_and_no_metric():
    """The report reads metric names, directions and roles from the task YAMLs (the catalogue):
    no string in its code (the leaderboard aside) is a task's or a metric's name, or a curve's
    prefix."""
    cat = metric_catalogue()
    names = set(cat) | set(task_info()) | {m for ms in cat.values() for m in ms}
    prefixes = {spec["prefix"] for t in cat for spec in series(cat, t)}
    folder = os.path.join(REPO, "reports")
    paths = [os.path.join(base, n) for base, _, files in os.walk(folder) for n in files
             if n.endswith(".py") and n != "leaderboard.py"]
    assert any(p.endswith(os.path.join("sections", "headline.py")) for p in paths)
    for path in paths:
        for text in code_strings(path):
            assert text not in names and not any(text.startswith(p) for p in prefixes | set(cat)), (path, text)


def test_the_heat_map_shows_its_title_and_labels_as_text():
    """The title, row and column labels are the texts' content (escaped), squeezed to fit
    with textLength where they are long, never replaced by the attribute."""
    svg = str(heat_map(["Arabic (ar)", "a very long row label <b>that overflows</b> its column"],
                       ["SmolLM2-135M-Instruct.Q4_1 [none]", "qwen"], [[0.0, 0.28], [None, 1.0]], "fully_target by language"))
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert texts[0] == "fully_target by language"
    assert "SmolLM2-135M-Instruct.Q4_1 [none]" in texts and "qwen" in texts and "Arabic (ar)" in texts
    assert "a very long row label &lt;b&gt;that overflows&lt;/b&gt; its column" in texts
    assert not any("textLength" in t for t in texts) and 'lengthAdjust="spacingAndGlyphs"' in svg


def test_the_first_screen_splits_the_samples_not_kept_by_cause(tmp_path):
    """The headline table gives, under a language task's headline, the share of samples not
    kept in full by first cause, read from the task's ``cause`` metrics."""
    write_output(str(tmp_path), settings=("none",))
    md = render(load_output(str(tmp_path)), "md")
    headline = md.split("## Headline", 1)[1].split("\n## ", 1)[0]
    assert "0.50 [" in headline and "not kept in full: 0.50 left the language, 0.00 degenerate, 0.00 unreadable" \
        in headline  # none: docs 10-19 drifted into English
