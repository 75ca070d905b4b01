"""Text from models and results files stays inert (``drift_eval.inert``): Markdown rendered
by GitHub's own renderer (cmark-gfm) shows it as text and makes no link, image, HTML or
heading of it; CSV cells never start a formula; terminal output carries no control
characters."""
import csv
import html
import io
import json
import re
import unicodedata
import xml.etree.ElementTree as ET

import pytest
from cmarkgfm.cmark import Options

from support.commands import not_json

from drift_eval import inert
from drift_eval.cli import main
from support.handmade_results import write_task_run

HOSTILE = [
    "![x](https://evil.example/i.png)", "[c](javascript:alert(1))", "<script>alert(1)</script>",
    "# Heading", "see https://evil.example and www.evil.example", "<https://evil.example>", "foo@evil.example",
    "a | b | c", "`code` **bold** _it_ ~~del~~", "1. list", "- item", "===", "&lt;b&gt; &amp;",
    "x<img src=x onerror=alert(1)>", "[ref]: https://evil.example", "> quote", "``` fence", "`", " `x` ",
    "line one\nline two\r\n# three", "\\*not emphasis\\*", "=HYPERLINK(\"https://evil.example\")",
]
MARKUP = re.compile(r"<(a|img|h[1-6]|script|ol|ul|li|blockquote|strong|em|del|pre|table|hr)\b", re.I)


@pytest.fixture(scope="module")
def render():
    cmarkgfm = pytest.importorskip("cmarkgfm")

    return lambda md: cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)


def _text(fragment: str) -> str:
    """The visible text of rendered HTML, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_renders_as_its_characters_and_nothing_else(render, text):
    out = render(f"Model {inert.markdown(text)} was run.\n")
    assert not MARKUP.search(out.replace("<code>", "").replace("</code>", "")), out
    assert _text(out) == _one_line(f"Model {text} was run."), out


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_table_cells_hold_their_text_in_one_cell(render, text):
    table = f"| model | value |\n|---|---|\n| {inert.markdown(text, cell=True)} | 1 |\n"
    out = render(table)
    cells = re.findall(r"<td>(.*?)</td>", out, re.S)
    assert len(cells) == 2 and _text(cells[1]) == "1", out
    assert not MARKUP.search(cells[0].replace("<code>", "").replace("</code>", "")), out
    assert _text(cells[0]) == _one_line(text), out


def test_empty_and_missing_values_are_empty():
    assert inert.markdown(None) == inert.markdown("") == ""
    assert inert.csv_cell(None) == ""


@pytest.mark.parametrize("value, cell", [
    ("=HYPERLINK(\"https://evil.example\")", "'=HYPERLINK(\"https://evil.example\")"),
    ("+1+1", "'+1+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "\\x0dx"), ("\u202e=1", "\\u202e=1"),
    ("SmolLM2", "SmolLM2"), ("log:0.25", "log:0.25"), (-0.5, -0.5), (3, 3), (True, "True"),
])
def test_csv_cells_never_start_a_formula(value, cell):
    assert inert.csv_cell(value) == cell
    buf = io.StringIO()
    csv.writer(buf).writerow([inert.csv_cell(value)])
    parsed = next(csv.reader(io.StringIO(buf.getvalue())))[0]
    assert not parsed.startswith(("=", "+", "@", "\t", "\r")) and not (parsed.startswith("-") and
                                                                       not isinstance(value, (int, float)))


def test_terminal_text_has_no_control_characters():
    hostile = "model\x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\x08\x9b31m\x7f"
    shown = inert.terminal(hostile)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", shown)
    assert shown == "model\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x0d\\x08\\x9b31m\\x7f"
    assert inert.terminal("a\tb\nc") == "a\tb\nc"
    assert inert.terminal("a\tb\nc\u2028d", one_line=True) == "a\\x09b\\x0ac\\u2028d"


def test_terminal_text_shows_every_format_character_escaped():
    """Bidirectional overrides and isolates, zero-width characters and the other format
    characters (Unicode category Cf) are shown escaped, so that a name cannot reorder or
    hide what a terminal or a CI log shows."""
    every = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf")
    assert len(every) > 150
    for one_line in (False, True):
        shown = inert.terminal("a" + every + "b", one_line=one_line)
        assert not any(unicodedata.category(ch) == "Cf" for ch in shown), one_line
    assert inert.terminal("PASS\u202e lanif") == "PASS\\u202e lanif"
    assert inert.terminal("\U000e0041x") == "\\U000e0041x"  # a tag character: eight hex digits, unambiguous


def test_json_output_is_strict_with_null_for_non_finite_numbers():
    value = {"a": float("nan"), "b": [1.0, float("inf"), (float("-inf"), 2)], "c": "NaN", "d": True, "e": 3}
    text = inert.json_text(value)
    assert json.loads(text, parse_constant=not_json) == {"a": None, "b": [1.0, None, [None, 2]], "c": "NaN",
                                                       "d": True, "e": 3}


def test_compare_writes_strict_json(tmp_path, capsys):
    """``drift-eval compare --format json`` on runs whose comparison has no interval or MDE
    to give: every number is finite or null."""
    base = write_task_run(tmp_path / "base", "shipped", [1] * 4)
    cand = write_task_run(tmp_path / "cand", "new", [1] * 4)
    assert main(["compare", str(cand), str(base), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out, parse_constant=not_json)
    assert rows and all(r["candidate"] == "new" for r in rows)


def test_terminal_text_always_encodes_and_is_xml():
    """A lone surrogate (a JSON file can hold one) or a non-character is shown escaped, so the
    text encodes as UTF-8 and is XML 1.0 (the JUnit file uses this function too)."""
    shown = inert.terminal("a\ud800b\ufffe\x01", one_line=True)
    assert shown == "a\\ud800b\\ufffe\\x01" and shown.encode("utf-8")
    ET.fromstring(f"<x>{shown}</x>")


def test_markdown_shows_control_and_format_characters_escaped(render):
    """A bidirectional override, a zero-width character, an escape sequence or a lone
    surrogate in a name is shown escaped in Markdown (a code span or prose), as in the
    terminal: the rendered page cannot reorder or hide what it shows."""
    hostile = "PASS\u202e lanif\u200b\x1b[2J\ud800\U000e0041 <b>x</b>"
    for shown in (inert.markdown(hostile), inert.markdown(hostile, cell=True), inert.markdown_text(hostile)):
        assert not any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in shown), shown
        assert "\\u202e" in shown and "\\u200b" in shown and "\\x1b" in shown and "\\ud800" in shown
        assert "\\U000e0041" in shown
        page = render(shown)
        assert not any(unicodedata.category(ch) in ("Cf", "Cs") for ch in page) and "<b>" not in page


def test_readable_json_prints_inert_and_reads_back_the_same():
    """``json_text(..., ensure_ascii=False)`` keeps letters readable but writes what the
    terminal must not show raw as JSON's own escapes: printing it changes nothing, it encodes
    as UTF-8, and a strict parser reads back the very same strings."""
    value = {"model": "Qwen\u202e\x85\x7f\ud800\ufffe\U000e0041\u2028 日本語 ü", "n": float("inf")}
    text = inert.json_text(value, ensure_ascii=False)
    assert inert.terminal(text) == text and text.encode("utf-8")
    assert "日本語 ü" in text and "\\u202e" in text and "\\udb40\\udc41" in text
    assert json.loads(text, parse_constant=not_json) == {**value, "n": None}
