"""The layers stay apart (the fast loop checks it): the import contract in pyproject.toml
(``[tool.importlinter]``: layers point one way, what reads results imports no torch,
transformers or lm-eval, code outside ``tasks/`` reaches no task's glue),
no import cycle between modules, imports of the package written absolute, and the light
modules light when they are really imported."""
import ast
import glob
import importlib
import json
import os
import re
import subprocess
import sys
import tomllib

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from support.checks import code_strings
from support.places import REPO

ROOT = str(REPO)
HEAVY = ("torch", "transformers", "lm_eval")
FOLDERS = {"harness_ext": "drift_eval", "metrics": "drift_eval.metrics", "reports": "drift_eval.reports",
           "tasks": "drift_eval.tasks"}  # pyproject.toml's package-dir
LIGHT = ["drift_eval", "drift_eval.settings", "drift_eval.files", "drift_eval.errors", "drift_eval.logs", "drift_eval.conversation",
         "drift_eval.inert", "drift_eval.catalogue",
         "drift_eval.metrics.langid", "drift_eval.metrics.drift", "drift_eval.metrics.conversation",
         "drift_eval.metrics.alpha", "drift_eval.metrics.decode", "drift_eval.metrics.rollout",
         "drift_eval.metrics.accessibility", "drift_eval.metrics.stats", "drift_eval.metrics.paired", "drift_eval.metrics.power",
         "drift_eval.metrics.survival", "drift_eval.metrics.values",
         "drift_eval.decide.results", "drift_eval.resultfiles.runfile", "drift_eval.resultfiles.names", "drift_eval.resultfiles.manifest", "drift_eval.decide.gate", "drift_eval.decide.compare",
         "drift_eval.decide.policy", "drift_eval.decide.pytest_plugin",
         "drift_eval.reports.render", "drift_eval.reports.svg", "drift_eval.reports.leaderboard",
         "drift_eval.compensation", "drift_eval.compensation.spans", "drift_eval.tasks",
         "drift_eval.taskdata.french", "drift_eval.taskdata.alpha",
         "drift_eval.plugin.request_types", "drift_eval.plugin.answers", "drift_eval.plugin.backends",
         "drift_eval.plugin.chat", "drift_eval.plugin.answer_cache", "drift_eval._startup"]


@pytest.fixture(scope="module")
def package_tree(tmp_path_factory):
    """The package as it installs (``drift_eval/`` with ``metrics/``, ``reports/`` and
    ``tasks/`` inside), as links into the checkout: the import graph of an editable install
    would miss the folders that pyproject.toml maps in."""
    tree = tmp_path_factory.mktemp("package")
    pkg = tree / "drift_eval"
    pkg.mkdir()
    for name in os.listdir(os.path.join(ROOT, "harness_ext")):
        os.symlink(os.path.join(ROOT, "harness_ext", name), pkg / name)
    for folder, module in FOLDERS.items():
        if folder != "harness_ext":
            os.symlink(os.path.join(ROOT, folder), pkg / module.rsplit(".", 1)[1])
    return str(tree)


def _in_tree(tree, code, *args):
    env = dict(os.environ, PYTHONPATH=tree, LM_EVAL_DRIFT_AUTOLOAD="0")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


def test_the_import_contract_holds(package_tree):
    code = ("import sys\n"
            "from importlinter.cli import lint_imports\n"
            "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")
    r = _in_tree(package_tree, code, os.path.join(ROOT, "pyproject.toml"))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as fh:
        contracts = fh.read().count("[[tool.importlinter.contracts]]")
    assert f"Contracts: {contracts} kept, 0 broken" in r.stdout, r.stdout[-2000:]


def test_no_import_cycle_between_modules(package_tree):
    """Strongly connected components of the module import graph (every import statement,
    function-level ones included) are single modules."""
    code = ("import grimp, json, sys\n"
            "g = grimp.build_graph('drift_eval', cache_dir=None)\n"
            "mods = sorted(g.modules)\n"
            "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in mods}))")
    r = _in_tree(package_tree, code)
    assert r.returncode == 0, r.stderr[-2000:]
    graph = json.loads(r.stdout)
    assert "drift_eval.metrics.stats" in graph and "drift_eval.taskdata.french" in graph  # the whole package
    names = sorted(graph)
    index = {m: i for i, m in enumerate(names)}
    rows, cols = zip(*[(index[a], index[b]) for a, targets in graph.items() for b in targets if b in index and a != b])
    matrix = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(matrix, directed=True, connection="strong")
    cycles = [sorted(names[i] for i in np.flatnonzero(labels == lab)) for lab in set(labels.tolist())
              if (labels == lab).sum() > 1]
    assert cycles == [], cycles


def test_light_modules_import_neither_torch_nor_transformers_nor_lm_eval():
    """Each light module, really imported (dynamic imports included), in one interpreter:
    the first one after which a heavy module is loaded is the one that pulled it in."""
    code = ("import importlib, json, sys\n"
            f"heavy = {HEAVY!r}\n"
            "for m in json.loads(sys.argv[1]):\n"
            "    importlib.import_module(m)\n"
            "    pulled = [h for h in heavy if h in sys.modules]\n"
            "    if pulled:\n"
            "        print(json.dumps([m, pulled])); sys.exit(0)\n"
            "print(json.dumps(None))")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(LIGHT)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) is None, f"pulls in heavy modules: {r.stdout}"


def test_building_a_report_context_imports_no_torch(tmp_path):
    code = ("import sys, json\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from support.handmade_results import write_output\n"
            "from drift_eval.decide.results import load_output\n"
            "from drift_eval.reports.render import render\n"
            "html = render(load_output(write_output(sys.argv[2])), 'html')\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "tests"), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def _python_files(*folders):
    for folder in folders:
        for base, _, names in os.walk(os.path.join(ROOT, folder)):
            for n in names:
                if n.endswith(".py"):
                    yield os.path.join(base, n)


def test_imports_of_the_package_are_absolute():
    """``from ..metrics import stats`` inside ``harness_ext/decide/`` would point a reader
    at ``harness_ext/metrics/``, which does not exist: the package's folders are mapped."""
    for path in _python_files(*FOLDERS):
        tree = ast.parse(open(path, encoding="utf-8").read())
        relative = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
        assert not relative, f"{os.path.relpath(path, ROOT)} line {relative[0]}: write the import absolute"


def test_harness_ext_builds_no_path_into_tasks():
    """Code outside ``tasks/`` reads the tasks' data from ``drift_eval.taskdata`` (the import
    contract checks the imports): no path into ``tasks/`` built by hand either."""
    for path in _python_files("harness_ext"):
        for text in code_strings(path):
            assert "tasks/" not in text and not text.startswith("drift_eval.tasks"), \
                f"{path} names a path under tasks/: {text!r}"


def test_no_test_imports_from_conftest():
    for path in _python_files("tests"):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module not in ("conftest",) and not (node.module or "").startswith("test_"), path


def test_the_readme_fits_in_250_lines():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        assert len(fh.read().splitlines()) <= 250


#: parameters a function may take beyond ``self`` or ``cls``, ``*args`` and ``**kwargs``;
#: more are grouped in a settings object
MOST_PARAMETERS = 8


def test_no_module_is_over_400_lines_and_no_function_takes_more_than_8_parameters():
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    long, many = [], []
    for path in files:
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            source = fh.read()
        if len(source.splitlines()) > 400:
            long.append(path)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
                count = len([n for n in names if n not in ("self", "cls")])
                if count > MOST_PARAMETERS:
                    many.append(f"{path}:{node.lineno} {node.name} ({count})")
    assert long == [] and many == [], (long, many)


def test_the_architecture_table_names_the_contracts_layers_in_order():
    """docs/architecture.md's table is the one description of the layers: its rows name the
    import contract's layers (pyproject.toml), highest first, each row the modules of one
    layer (``tasks/*/utils.py`` stands for every task folder's; what a row says in
    parentheses is about the modules, not more of them)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        contracts = tomllib.load(fh)["tool"]["importlinter"]["contracts"]
    [layers] = [c["layers"] for c in contracts if c["id"] == "layers"]
    want = [{m.strip() for m in layer.split("|")} for layer in layers]
    utils = {f"drift_eval.tasks.{os.path.basename(os.path.dirname(p))}.utils"
             for p in glob.glob(os.path.join(ROOT, "tasks", "*", "utils.py"))}
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        doc = fh.read()
    table = doc[doc.index("| layer | modules |"):].split("\n\n")[0].splitlines()[2:]
    rows = []
    for line in table:
        cell = re.sub(r"\([^()]*\)", "", line.split("|")[2])
        names = set(re.findall(r"`([^`]+)`", cell))
        rows.append(utils if names == {"tasks/*/utils.py"} else names)
    assert rows == want


DEFERRED = re.compile(r"# deferred, (start-up|optional|import cycle)\b")


def _function_imports(source: str):
    """(line, text) of every import statement inside a function."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(set(found))


def _says_why(lines: list, lineno: int) -> bool:
    """The import's line, or the comments, imports, ``try:`` and ``except`` lines right above
    it, say why."""
    i = lineno - 1
    while i >= 0:
        text = lines[i].strip()
        if DEFERRED.search(lines[i]):
            return True
        if i != lineno - 1 and not text.startswith(("#", "import ", "from ", "try:", "except")):
            return False
        i -= 1
    return False


def test_imports_inside_functions_say_why_they_are_not_at_the_top():
    """Imports sit at the top of a module; one inside a function says why, in a comment
    (``# deferred, start-up: ...``, ``# deferred, optional: ...`` or ``# deferred, import
    cycle: ...``)."""
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    unexplained = []
    for path in files:
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            source = fh.read()
        lines = source.splitlines()
        unexplained += [f"{path}:{n}: {lines[n - 1].strip()}" for n in _function_imports(source)
                        if not _says_why(lines, n)]
    assert unexplained == [], "\n".join(unexplained[:40])


def test_every_python_file_of_the_repository_parses():
    """Benchmarks and scripts that no test imports still compile (an import pasted at
    column 0 inside a function once broke two benchmarks unnoticed)."""
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert len(files) > 100
    for path in files:
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            ast.parse(fh.read(), filename=path)


@pytest.mark.parametrize("heading", ["## One drift request, start to end", "## One α request, start to end",
                                     "## One results folder, read"])
def test_the_architecture_doc_follows_each_path_in_under_15_lines_naming_real_code(heading):
    """docs/architecture.md follows a drift request, an α request and a results folder from
    start to end, each in under 15 lines after its command, and every module, class or
    function it names by its dotted path (``plugin.run_check.for_run``) exists."""
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        doc = fh.read()
    assert heading in doc
    section = doc.split(heading, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.strip()]
    assert lines[0].startswith("`") and len(lines) - 1 < 15, lines  # the command, then the path
    floors = ("plugin.", "measure.", "metrics.", "compensation.", "decide.", "resultfiles.", "reports.",
              "catalogue.", "settings.")
    named = [n for n in re.findall(r"`([A-Za-z_][\w.]*)`", section) if n.startswith(floors)]
    assert len(named) >= 4
    for name in named:
        parts = ("drift_eval." + name).split(".")
        for cut in range(len(parts), 1, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)  # an AttributeError names what the doc gets wrong
            break
        else:
            raise AssertionError(f"{heading}: `{name}` names no module of drift_eval")
