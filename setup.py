"""Build hook: ship the start-up file that registers the drift tasks and model with lm-eval.

lm-eval 0.4.13 has no plugin discovery, so the wheel carries ``lm_eval_drift.pth`` at the
root of site-packages. Python runs its one import line at start-up; it loads the installed
``drift_eval/_startup.py`` by its location (never by name, so that a ``drift_eval`` placed
earlier on ``sys.path`` is not run by every program), and that module only adds a tiny
import hook that acts when ``lm_eval`` itself is imported (see ``harness_ext/_startup.py``).

The line finds the file beside the ``.pth`` (``sitedir``: the folder ``site`` is processing,
a name the line sees because ``site.addpackage`` executes it). An editable install has no
``drift_eval`` folder there, so its copy of the line names the source file instead.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "lm_eval_drift.pth"
HERE = os.path.dirname(os.path.abspath(__file__))
BESIDE = '__import__("os").path.join(sitedir, "drift_eval", "_startup.py")'  # where the wheel's line looks


def _pth_source():
    return os.path.join(HERE, "harness_ext", PTH)


def _editable_line() -> bytes:
    with open(_pth_source(), encoding="utf-8") as fh:
        line = fh.read()
    if BESIDE not in line:
        raise RuntimeError(f"{_pth_source()} does not locate _startup.py the expected way")
    return line.replace(BESIDE, repr(os.path.join(HERE, "harness_ext", "_startup.py"))).encode("utf-8")


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(_pth_source(), os.path.join(self.build_lib, PTH), preserve_mode=0)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


class _StrategyWithPth:
    """Wraps setuptools' editable strategy so that the editable wheel carries the file too."""

    def __init__(self, strategy):
        self._strategy = strategy

    def __enter__(self):
        self._strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self._strategy.__exit__(*exc)

    def __call__(self, wheel, files, mapping):
        self._strategy(wheel, files, mapping)
        wheel.writestr(PTH, _editable_line())


class EditableWheelWithPth(editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _StrategyWithPth(super()._select_strategy(*args, **kwargs))


def _packages() -> list[str]:
    """Every package of the four folders that pyproject.toml's ``package-dir`` maps into
    ``drift_eval``, found by rule (a folder with an ``__init__.py``), not kept by hand."""
    try:  # deferred, optional: tomllib is Python 3.11's; 3.10 builds with tomli
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the build requires tomli (pyproject.toml)
        import tomli as tomllib

    with open(os.path.join(HERE, "pyproject.toml"), "rb") as fh:
        mapping = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    found = []
    for package, folder in mapping.items():
        base = os.path.join(HERE, folder)
        for root, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            if "__init__.py" not in files:
                dirs[:] = []  # not a package: nothing below it is one either
                continue
            rel = os.path.relpath(root, base)
            name = package if rel == "." else package + "." + rel.replace(os.sep, ".")
            if name not in mapping or name == package:  # a mapped sub-folder is found from its own entry
                found.append(name)
    return sorted(set(found))


setup(packages=_packages(), cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
