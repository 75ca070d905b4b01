"""The layers stay apart: what reads results imports no torch, and the code outside
``tasks/`` reaches task data only through each task's ``data.py``."""
import ast
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("torch", "transformers", "lm_eval")
LIGHT = ["drift_eval", "drift_eval.settings", "drift_eval.files", "drift_eval.errors",
         "drift_eval.metrics.langid", "drift_eval.metrics.drift", "drift_eval.metrics.conversation",
         "drift_eval.metrics.alpha", "drift_eval.metrics.decode", "drift_eval.metrics.rollout",
         "drift_eval.metrics.accessibility",
         "drift_eval.metrics.stats", "drift_eval.decide.results", "drift_eval.decide.gate",
         "drift_eval.decide.compare", "drift_eval.decide.answer_cache",
         "drift_eval.decide.pytest_plugin", "drift_eval.reports.render", "drift_eval.reports.svg",
         "drift_eval.reports.leaderboard",
         "drift_eval.compensation", "drift_eval.compensation.spans", "drift_eval.tasks",
         "drift_eval.tasks.drift_french.data", "drift_eval.tasks.drift_alpha.data",
         "drift_eval.measure.conversation", "drift_eval._startup"]


@pytest.mark.slow
@pytest.mark.parametrize("module", LIGHT)
def test_module_imports_neither_torch_nor_transformers(module):
    code = (f"import sys, json; import {module}; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [], f"{module} pulls in heavy modules"


@pytest.mark.slow
def test_building_a_report_context_imports_no_torch(tmp_path):
    code = ("import sys, json\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from handmade_results import write_output\n"
            "from drift_eval.decide.results import load_output\n"
            "from drift_eval.reports.render import render\n"
            "html = render(load_output(write_output(sys.argv[2])), 'html')\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "tests"), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def _python_files(folder):
    for base, _, names in os.walk(os.path.join(ROOT, folder)):
        for n in names:
            if n.endswith(".py"):
                yield os.path.join(base, n)


def _imported_task_modules(path):
    """Modules under ``drift_eval.tasks`` that ``path`` imports (absolute or relative)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    rel = os.path.relpath(path, os.path.join(ROOT, "harness_ext")).split(os.sep)[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["drift_eval", *rel][: len(rel) + 2 - node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            targets = [name] if node.module else [f"{name}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        yield from (t for t in targets if t == "drift_eval.tasks" or t.startswith("drift_eval.tasks."))


def test_harness_ext_reaches_tasks_only_through_their_data_loaders():
    allowed = {"drift_eval.tasks"}  # task_folder(), metric_catalogue()
    for path in _python_files("harness_ext"):
        for mod in _imported_task_modules(path):
            parts = mod.split(".")
            assert mod in allowed or (len(parts) == 4 and parts[3] == "data"), f"{path} imports {mod}"
        for text in _code_strings(path):  # no path into tasks/ built by hand
            assert "tasks/" not in text and not text.startswith("drift_eval.tasks"), \
                f"{path} names a path under tasks/: {text!r}"


def _code_strings(path):
    """String literals of a module, docstrings left out."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_test_imports_from_conftest():
    for path in _python_files("tests"):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module not in ("conftest",) and not (node.module or "").startswith("test_"), path
