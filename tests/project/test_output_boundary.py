"""Every writer and printer of the package goes through one inert boundary
(``drift_eval.inert``), found by reading the code, not by a list kept by hand: each call
that prints (``print``, ``stream.write``) or writes a file (``write_text_atomic``,
``write_json_atomic``, ``atomic_open``, ``json.dump``, an XML tree's ``write``) must be in
``SITES`` with the boundary its text passes through, and the function that makes the call
must use that boundary. A new printer or writer fails here until it says what makes its
text inert; a listed one that stops using its boundary fails too. The generated hostile
folders (tests/decisions/test_hostile_folders.py) check the outputs themselves."""
import ast
import os

from drift_eval import cli
from support.places import REPO

ROOT = str(REPO)
FOLDERS = ("harness_ext", "reports", "metrics", "tasks")
WRITERS = {"write_text_atomic", "write_json_atomic", "atomic_open", "write_summary"}

#: the command line's standard output: ``drift_eval.cli.main`` replaces ``sys.stdout`` with a
#: stream that escapes every control and format character (``inert.terminal``)
CLI_STDOUT = "cli stdout"
#: text the project composes itself, from numbers, settings and its own words: nothing read
#: from a results file or a model reaches it
OWN = "own text"
#: a writer that others call (one of ``WRITERS``): each of its callers is a site of its own
HELPER = "writer helper"

#: (module, function, kind) -> the boundary: CLI_STDOUT, OWN, or the names the function
#: must use (each must appear in its code)
SITES = {
    ("harness_ext/_startup.py", "_Loader.exec_module", "write sys.stderr"): OWN,  # lm-eval's import failed
    ("harness_ext/cli/__init__.py", "_InertOutput.write", "write self._stream"): ("inert.terminal",),
    ("harness_ext/cli/__init__.py", "_main", "print sys.stderr"): ("inert.terminal",),
    ("harness_ext/cli/accessibility.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/accessibility.py", "run", "print sys.stderr"): OWN,
    ("harness_ext/cli/accessibility.py", "run.progress", "print sys.stderr"): OWN,
    ("harness_ext/cli/alpha.py", "_print_decomposition", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/alpha.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/alpha.py", "run", "print sys.stderr"): OWN,
    ("harness_ext/cli/compare.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/decode.py", "_print_summary", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/decode.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/decode.py", "run", "print sys.stderr"): OWN,
    ("harness_ext/cli/decode.py", "run.log", "write bar"): OWN,  # a progress bar's line: scene ids and accuracies
    ("harness_ext/cli/demo.py", "run", "file write_text_atomic"): OWN,  # an empty file: is the folder writable
    ("harness_ext/cli/demo.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/demo.py", "run", "print sys.stderr"): ("inert.terminal",),
    ("harness_ext/cli/leaderboard.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/model_path.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/position_bias.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/cli/position_bias.py", "run", "print sys.stderr"): OWN,
    ("harness_ext/cli/report.py", "run", "print stdout"): CLI_STDOUT,
    ("harness_ext/decide/gate.py", "write_junit", "file atomic_open"): ("inert.terminal",),
    ("harness_ext/decide/gate.py", "write_junit", "write ET.ElementTree(ts)"): ("inert.terminal",),
    ("harness_ext/decide/gate.py", "write_summary", "file atomic_open"): HELPER,
    ("harness_ext/decide/gate.py", "write_summary", "write fh"): HELPER,
    ("harness_ext/decide/gate.py", "run_gate", "file write_summary"): ("summary_markdown",),
    ("harness_ext/files.py", "write_json_atomic", "file atomic_open"): HELPER,
    ("harness_ext/files.py", "write_json_atomic", "file json.dump"): HELPER,
    ("harness_ext/files.py", "write_text_atomic", "file atomic_open"): HELPER,
    ("harness_ext/files.py", "write_text_atomic", "write fh"): HELPER,
    # stored data, read back by the loader and never shown raw: JSON of measurements
    ("harness_ext/measure/calibration.py", "_measure", "file write_json_atomic"): OWN,
    ("harness_ext/measure/decode.py", "generate", "write store"): OWN,  # the answer cache (SQLite)
    ("harness_ext/measure/decode.py", "run", "file write_json_atomic"): OWN,
    ("harness_ext/plugin/local_models.py", "_convert", "print sys.stderr"): ("inert.terminal",),
    ("harness_ext/plugin/registration.py", "_warn", "write sys.stderr"): ("inert.terminal",),
    ("harness_ext/plugin/sweep.py", "_log", "print stdout"): ("inert.terminal",),
    ("harness_ext/plugin/sweep.py", "_warn", "print sys.stderr"): ("inert.terminal",),
    ("harness_ext/plugin/sweep_folder.py", "write_manifest", "file write_json_atomic"): OWN,  # the sweep's own options
    ("reports/leaderboard.py", "write_leaderboard", "file write_text_atomic"): (
        "markdown", "inert.json_text", "inert.csv_cell"),
    ("reports/writing.py", "write", "file write_text_atomic"): ("render_text",),
    ("tasks/drift_languages/_generate_configs.py", "main", "file write_text_atomic"): OWN,  # task files from templates
    ("tasks/drift_languages/_generate_configs.py", "main", "print stdout"): OWN,
}


def _kind(call: ast.Call) -> str | None:
    fn = call.func
    if isinstance(fn, ast.Name) and fn.id == "print":
        target = next((k.value for k in call.keywords if k.arg == "file"), None)
        return "print " + (ast.unparse(target) if target is not None else "stdout")
    if isinstance(fn, ast.Attribute) and fn.attr == "write":
        return "write " + ast.unparse(fn.value)
    name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
    if name in WRITERS:
        return f"file {name}"
    if isinstance(fn, ast.Attribute) and fn.attr == "dump" and ast.unparse(fn.value) == "json":
        return "file json.dump"
    return None


def _sites() -> dict:
    """``{(module, function, kind): the function's source}`` of every printer and writer."""
    found = {}
    for folder in FOLDERS:
        for base, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(n for n in names if n.endswith(".py")):
                path = os.path.join(base, name)
                with open(path, encoding="utf-8") as fh:
                    source = fh.read()
                rel = os.path.relpath(path, ROOT).replace(os.sep, "/")

                def visit(node, stack, code):
                    for child in ast.iter_child_nodes(node):
                        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                            inner = ast.get_source_segment(source, child) if not stack or \
                                isinstance(node, ast.ClassDef) else code
                            visit(child, stack + [child.name], inner)
                            continue
                        kind = _kind(child) if isinstance(child, ast.Call) else None
                        if kind:
                            found[(rel, ".".join(stack) or "<module>", kind)] = code
                        visit(child, stack, code)

                visit(ast.parse(source), [], source)
    return found


def test_every_printer_and_writer_names_its_inert_boundary():
    found = _sites()
    assert len(found) >= 40
    unlisted = sorted(set(found) - set(SITES))
    assert not unlisted, f"printers or writers with no inert boundary in SITES: {unlisted}"
    stale = sorted(set(SITES) - set(found))
    assert not stale, f"SITES lists calls that are gone: {stale}"
    for site, boundary in SITES.items():
        if boundary == CLI_STDOUT:
            assert site[0].startswith("harness_ext/cli/"), site
        elif boundary == HELPER:
            assert site[1] in WRITERS, site
        elif boundary != OWN:
            missing = [name for name in boundary if name not in found[site]]
            assert not missing, f"{site} no longer uses {missing}"


def test_the_command_lines_standard_output_is_the_inert_one(monkeypatch, capsys):
    """What ``CLI_STDOUT`` rests on: whatever a command prints under ``drift_eval.cli.main``
    reaches the terminal through ``inert.terminal``."""
    class Probe:
        NAME, HELP = "probe", "prints hostile text"

        @staticmethod
        def add_arguments(p):
            pass

        @staticmethod
        def run(args):
            print("PASS\u202e\x1b[2J\ud800")
            return 0

    monkeypatch.setattr(cli, "COMMANDS", (Probe,))
    assert cli.main(["probe"]) == 0
    assert capsys.readouterr().out == "PASS\\u202e\\x1b[2J\\ud800\n"
