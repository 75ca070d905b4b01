"""drift-eval report on results that carry hostile text (a model name that is a spreadsheet
formula, a task name and an answer in Markdown and HTML): every format shows it as text."""
import csv
import io
import json
import os
import re

import pytest
from cmarkgfm.cmark import Options

from support.checks import run_cli
from support.handmade_results import write_task_run


HOSTILE_NAME = '=HYPERLINK("https://evil.example")![x](https://evil.example/i.png)<img src=x onerror=alert(1)>'
HOSTILE_TASK = "evil_task![t](javascript:alert(1))<b>x"
HOSTILE_ANSWER = "# Heading\n![x](https://evil.example/i.png) [c](javascript:alert(1)) <b>bold</b> www.evil.example"


def test_hostile_text_from_results_is_inert_in_every_format(tmp_path, capsys):
    """A results folder written to attack: a model named as a spreadsheet formula with
    Markdown image and HTML inside, an answer with a heading, an image, a javascript: link,
    HTML and a bare address. Markdown (rendered by GitHub's cmark-gfm), HTML, CSV and JSON
    show them as text; a task named with an image, and setting labels, cannot be hostile (a
    results file with such a task name, or whose compensation is not a setting, is refused
    by the loader, with one line)."""
    write_task_run(tmp_path / "bad", "m", [1, 0, 1, 1], task=HOSTILE_TASK)
    rc, _, err = run_cli(capsys, "report", tmp_path / "bad", "-o", tmp_path / "bad.md")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "not a task name" in err, err
    root = tmp_path / "out"
    folder = write_task_run(root, "m", [1, 0, 1, 1], task="evil_task")
    for path in os.listdir(folder):
        full = os.path.join(folder, path)
        if path.startswith("results_"):
            doc = json.loads(open(full).read())
            doc["config"]["model_args"]["pretrained"] = HOSTILE_NAME
            open(full, "w").write(json.dumps(doc))
        else:
            rows = [json.loads(line) for line in open(full)]
            for r in rows:
                r["resps"], r["filtered_resps"] = [[HOSTILE_ANSWER]], [HOSTILE_ANSWER]
            open(full, "w").write("".join(json.dumps(r) + "\n" for r in rows))
    for fmt in ("md", "html", "csv", "json"):
        rc, _, err = run_cli(capsys, "report", root, "-o", tmp_path / f"r.{fmt}")
        assert rc == 0, err
    cmarkgfm = pytest.importorskip("cmarkgfm")

    md = (tmp_path / "r.md").read_text()
    page = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    assert "evil.example" in page and "HYPERLINK" in page and "evil_task" in page  # shown ...
    assert not re.search(r'<img src="https://evil|<img src=x|<a href="(https://evil|javascript|http://www)', page)
    assert "<b>bold</b>" not in page and not re.search(r"<h[1-6]>Heading", page)  # ... as text
    html = (tmp_path / "r.html").read_text()
    assert "<img src=x" not in html and "<b>bold</b>" not in html and "&lt;img src=x" in html
    for row in csv.reader(io.StringIO((tmp_path / "r.csv").read_text())):
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or re.fullmatch(r"-[0-9.e+-]+", cell), cell
    doc = json.loads((tmp_path / "r.json").read_text())
    assert HOSTILE_NAME in json.dumps(doc, ensure_ascii=False) or HOSTILE_NAME in doc["models"]
