"""What several test files share beyond models, commands and servers (``support.models``,
``support.commands``, ``support.servers``) and handmade results
(``support.handmade_results``): drift-eval's ``main`` run in-process, the check of a
one-line usage error, a gate policy file, an object whose unpickling runs code, a module's
string literals and a benchmark script loaded as a module."""
import ast
import importlib.util
import os
import sys

from drift_eval.cli import main
from support.places import BENCHMARKS



def run_cli(capsys, *args):
    """``drift-eval ARGS`` through ``drift_eval.cli.main`` in this process: (exit code,
    standard output, standard error)."""
    rc = main([str(a) for a in args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def one_line_error(rc, err, needle=""):
    """Unusable input: exit code 2 and one ``drift-eval: error:`` line holding ``needle``
    (returned)."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("drift-eval: error: "), err
    assert needle in lines[0], err
    return lines[0]


def write_policy(folder, text):
    """A gate policy file ``gate.yaml`` in ``folder`` holding ``text``."""
    path = folder / "gate.yaml"
    path.write_text(text)
    return path


class Planted:
    """Unpickling this runs a shell command that creates a file: the proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def code_strings(path):
    """The string literals of a module (f-string pieces too), docstrings left out."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def benchmark(name):
    """The script ``benchmarks/NAME.py`` loaded as a module (the scripts' folder on the
    import path, as when the script runs: a script imports the modules beside it)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
