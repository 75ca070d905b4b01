"""Dilution compensation: the attention-logit bias toward the instruction (``bias``), where
the instruction's span ends in a prompt (``spans``), and the per-head strengths of
``compensation=head`` (``calibration``). The algebra is in ``docs/compensation.md``.

``from drift_eval.compensation import install, CompensationConfig`` works as before; the
names load on first use, so importing ``drift_eval.compensation.spans`` needs no torch.
"""
from ..settings import MODES, SPANS, CompensationConfig  # noqa: F401  (torch-free)

_FROM_BIAS = ("IMPLEMENTATIONS", "DriftState", "install", "set_base", "set_implementation", "const_level",
              "bias_for", "logical_positions", "register_attention", "drift_sdpa", "drift_eager")


def __getattr__(name):
    if name in _FROM_BIAS:
        from . import bias

        return getattr(bias, name)
    if name == "attention_modules":
        from ..measure.capture import attention_modules

        return attention_modules
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
