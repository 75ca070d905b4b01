"""lm-eval-drift: instruction drift, language persistence and prompt dilution for lm-eval.

The import package ``drift_eval`` maps the repository folders:
``harness_ext/`` (this package: the lm-eval model, compensation, CLI), ``tasks/``
(``drift_eval.tasks``), ``metrics/`` (``drift_eval.metrics``, pure maths, no torch) and
``reports/`` (``drift_eval.reports``). Importing it is cheap: heavy modules load on use.
"""

__version__ = "0.1.0"
