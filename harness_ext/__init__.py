"""lm-eval-drift: instruction drift, language persistence and prompt dilution for lm-eval.

The import package ``drift_eval`` is laid out by layer (docs/architecture.md), lowest first:

* ``drift_eval.errors``, ``settings``, ``files``, ``conversation``: shared, pure Python;
* ``drift_eval.metrics`` (``metrics/``): the maths, pure Python;
* ``drift_eval.tasks`` (``tasks/``): the lm-eval task folders (their ``data.py`` loaders are
  pure Python, their ``utils.py`` lm-eval's);
* ``drift_eval.anatomy``, ``drift_eval.compensation``, ``drift_eval.measure``: a model's parts,
  the attention-logit bias, and measurements inside a model (torch);
* ``drift_eval.plugin``: the lm-eval glue (``hf-drift``, the drift request types, the
  wrapper a drift run's model gets, conversations, sweeps, registration);
* ``drift_eval.decide`` and ``drift_eval.reports`` (``reports/``): what reads results
  folders (comparisons, gates, the pytest plugin, reports, the leaderboard), pure Python;
* ``drift_eval.cli``: ``drift-eval``, one module per command.

Importing this package is cheap: it imports nothing.
"""

__version__ = "0.1.0"
