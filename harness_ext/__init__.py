"""lm-eval-drift: instruction drift, language persistence and prompt dilution for lm-eval.

The import package ``drift_eval`` is laid out by layer: docs/architecture.md has the one
table of them, which a test checks against the import contract in pyproject.toml.

Importing this package is cheap: it imports nothing.
"""

__version__ = "0.1.0"
