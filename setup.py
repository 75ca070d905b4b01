"""Build hook: ship the start-up file that registers the drift tasks and model with lm-eval.

lm-eval 0.4.13 has no plugin discovery, so the wheel carries ``lm_eval_drift.pth`` at the
root of site-packages. Python runs its one import line at start-up; the imported module only
adds a tiny import hook that acts when ``lm_eval`` itself is imported (see
``harness_ext/_startup.py``).
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "lm_eval_drift.pth"


def _pth_source():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness_ext", PTH)


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
        with open(_pth_source(), "rb") as fh:
            wheel.writestr(PTH, fh.read())


class EditableWheelWithPth(editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _StrategyWithPth(super()._select_strategy(*args, **kwargs))


setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
