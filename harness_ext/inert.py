"""Text from models and from results files, made inert for each output. Pure Python.

Results folders are shared between people and CI jobs, and model output is untrusted
text: an answer, a model name, a setting label or a task name read from a results file
must never act in what the project writes. One function per output:

* ``markdown``: the text as a Markdown code span, on one line, its control and format
  characters escaped as ``terminal`` shows them: inside a code span nothing
  is markup (no image, link, autolink, HTML, heading, emphasis or entity; backslash-escaping
  the metacharacters instead would still let GitHub's renderer autolink bare addresses). A
  run of backticks in the text gets a longer fence; in a table cell (``cell=True``) a ``|``
  is written ``\\|``, which GitHub's table rule turns back into ``|`` inside the cell;
* ``markdown_text``: prose the project writes around such names, as Markdown text that
  renders as its characters (control and format characters escaped as in ``markdown``):
  inline metacharacters backslash-escaped, ``<`` and ``&`` as
  entities, a line-start marker at its start escaped, on one line; a text that could hold
  an autolink (``@``, ``://``, ``www.``) becomes a code span instead, which no renderer
  links;
* ``csv_cell``: a spreadsheet cell that is never a formula: a value that begins with
  ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (OWASP's rule
  against CSV injection), its control and format characters escaped as ``terminal`` shows
  them; numbers are left as they are;
* ``terminal``: the text with every control character (C0, DEL, C1: escape sequences,
  carriage returns, bells...) and every format character (bidirectional overrides,
  zero-width characters) written as a visible escape such as ``\\x1b`` or ``\\u202e``, so
  printing it cannot move the cursor, recolour or retitle the terminal, or reorder or hide
  what a log shows (lone surrogates and U+FFFE/U+FFFF too: the text always encodes, and is
  always XML 1.0, so JUnit files use it as well);

* ``json_text``: strict JSON (RFC 8259): a number that is not finite (NaN, ±infinity,
  which Python's ``json`` would write as the non-standard ``NaN``/``Infinity`` that strict
  parsers reject) is written ``null``, and the characters ``terminal`` escapes are ``\\u``
  escapes (JSON's own), so the text prints inert and reads back the same.

HTML is escaped by Jinja's autoescaping, after every value a template writes has had its
control and format characters escaped as ``terminal`` does (``reports.templating``'s
``finalize``); SVG labels the same way (``reports.svg.escape``).
"""
from __future__ import annotations

import json
import math
import re

_BACKTICKS = re.compile(r"`+")
_INLINE = re.compile(r"([\\`*_\[\]!|~])")
_LINE_START = re.compile(r"^(\s*)([#>+=-]|\d+[.)])")
_AUTOLINK = re.compile(r"@|://|www\.", re.I)
_NEWLINES = re.compile(r"[\r\n\u2028\u2029]+")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: Unicode's format characters (category Cf, as of Unicode 15): bidirectional overrides and
#: isolates, zero-width characters, invisible operators, tags; they can reorder or hide what
#: a terminal or a log viewer shows (tests/decisions/test_inert.py checks the list against unicodedata)
FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
          "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
          "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
#: lone surrogates (no character: they cannot be encoded) and the non-characters U+FFFE and U+FFFF
_NOT_TEXT = "\ud800-\udfff\ufffe\uffff"
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{FORMAT}{_NOT_TEXT}]")
_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{FORMAT}{_NOT_TEXT}]")


def markdown(text, cell: bool = False) -> str:
    """``text`` (anything; ``None`` is empty) as a Markdown code span that renders as its
    characters, on one line (``cell``: inside a table cell)."""
    if text is None or str(text) == "":
        return ""
    text = _CONTROL.sub(_escape, _NEWLINES.sub(" ", str(text)))
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_text(text) -> str:
    """``text`` as inert Markdown prose on one line (code span where it could autolink)."""
    if text is None:
        return ""
    text = _CONTROL.sub(_escape, _NEWLINES.sub(" ", str(text)))
    if _AUTOLINK.search(text):
        return markdown(text)
    text = _INLINE.sub(r"\\\1", text.replace("&", "&amp;").replace("<", "&lt;"))
    return _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def csv_cell(value):
    """``value`` as a CSV cell a spreadsheet shows as text: numbers (not booleans) as they
    are, other values as text with a leading ``'`` when they would start a formula."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if value is None:
        return ""
    text = terminal(value)
    return f"'{text}" if text.startswith(_FORMULA_START) else text


def terminal(text, one_line: bool = False) -> str:
    """``text`` with every control and format character but tab and newline shown as an
    escape (``one_line``: those too, and the line and paragraph separators, for a value
    printed inside a line)."""
    pattern = _ONE_LINE if one_line else _CONTROL
    return pattern.sub(_escape, str(text))


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def finite(value):
    """``value`` with every float that is not finite, in it at any depth (dicts, lists,
    tuples), replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


#: what JSON may hold raw but a terminal must not show raw (``ensure_ascii=False`` keeps
#: it; ``json`` escapes C0 itself): DEL, C1, format characters, separators, non-text
_JSON_RAW = re.compile(f"[\x7f-\x9f\u2028\u2029{FORMAT}{_NOT_TEXT}]")


def _json_escape(match) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON writes a character beyond the BMP
    return f"\\u{0xd800 + (code >> 10):04x}\\u{0xdc00 + (code & 0x3ff):04x}"


def json_text(value, **kwargs) -> str:
    """``json.dumps`` that writes strict JSON: non-finite numbers as ``null``
    (``allow_nan=False`` behind it, so that none slips through). With
    ``ensure_ascii=False`` text stays readable, but what a terminal must not show raw (DEL,
    C1, format characters, separators, lone surrogates) is written as a ``\\u`` escape, so
    the JSON reads back the same, prints inert and always encodes as UTF-8."""
    return _JSON_RAW.sub(_json_escape, json.dumps(finite(value), allow_nan=False, **kwargs))
