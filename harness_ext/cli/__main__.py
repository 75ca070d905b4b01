"""``python -m drift_eval.cli``: the same as ``drift-eval``."""
import sys

from drift_eval.cli import main

sys.exit(main())
