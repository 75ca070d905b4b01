"""The wheel that ``pip install`` builds holds the whole package: every module, template,
task file and data file of the four folders that pyproject.toml maps into ``drift_eval``,
and the start-up file at the root of site-packages. A hand-kept package list or a
package-data pattern that misses a folder fails here, not on a user's machine."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from support.places import REPO

ROOT = str(REPO)
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

with open(os.path.join(ROOT, "pyproject.toml"), "rb") as _fh:
    #: source folder -> where it lies in the wheel (pyproject.toml's package-dir)
    FOLDERS = {folder: package.replace(".", "/")
               for package, folder in tomllib.load(_fh)["tool"]["setuptools"]["package-dir"].items()}
AT_ROOT = {"harness_ext/lm_eval_drift.pth": "lm_eval_drift.pth"}  # site-packages itself
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md")


def _source_files():
    for folder in FOLDERS:
        for base, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
            for name in files:
                if not name.startswith(".") and not name.endswith((".pyc", ".pyo")):
                    yield os.path.relpath(os.path.join(base, name), ROOT).replace(os.sep, "/")


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory):
    """The file names in a wheel built from a clean copy of the sources (no ``build/`` folder
    left from an earlier build can fill a gap)."""
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools (the test extra)")
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in BUILD_FILES:
        shutil.copy(os.path.join(ROOT, name), src / name)
    for folder in FOLDERS:
        shutil.copytree(os.path.join(ROOT, folder), src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        str(src), "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def test_the_wheel_holds_every_file_of_the_package(wheel_names):
    files = list(_source_files())
    assert any(f.startswith("reports/templates/html/") for f in files)  # the walk sees the subfolders
    missing = []
    for f in files:
        top, rest = f.split("/", 1)
        if AT_ROOT.get(f, f"{FOLDERS[top]}/{rest}") not in wheel_names:
            missing.append(f)
    assert not missing, f"not in the wheel: {missing}"


def test_the_wheel_holds_nothing_from_outside_the_package(wheel_names):
    shipped = {n for n in wheel_names if ".dist-info/" not in n}
    assert shipped and all(n.startswith("drift_eval/") or n in AT_ROOT.values() for n in shipped), \
        sorted(n for n in shipped if not n.startswith("drift_eval/"))
