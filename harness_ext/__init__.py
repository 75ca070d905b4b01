"""lm-eval-drift: instruction drift, language persistence and prompt dilution for lm-eval.

The import package ``drift_eval`` is laid out by layer (docs/architecture.md):

* ``drift_eval.plugin``: the lm-eval glue (``hf-drift``, request types, task base,
  registration, local model files);
* ``drift_eval.compensation``: the attention-logit bias, instruction spans, per-head
  calibration;
* ``drift_eval.measure``: measurements inside a model (activation capture, conversations,
  α, position bias, accessibility);
* ``drift_eval.decide``: results folders, sweeps, gates, the pytest plugin;
* ``drift_eval.metrics`` (``metrics/``) and ``drift_eval.reports`` (``reports/``): pure
  maths and the Jinja reports, no torch; ``drift_eval.tasks`` (``tasks/``): the lm-eval
  task folders; ``drift_eval.settings`` and ``drift_eval.files``: setting labels and file
  I/O, no torch.

Importing this package is cheap: heavy modules load on use. ``drift_eval.alpha``,
``drift_eval.position_bias`` and ``drift_eval.cramming`` (paths that earlier versions
documented) still import, as their ``drift_eval.measure`` modules, with a deprecation
warning.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.1.0"

_MOVED = {f"{__name__}.{old}": f"{__name__}.measure.{old}" for old in ("alpha", "position_bias", "cramming")}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a moved module's old name as its new module (the same module object)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in _MOVED else None

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {_MOVED[spec.name]}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(_MOVED[spec.name])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())
