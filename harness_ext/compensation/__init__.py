"""Dilution compensation: the attention-logit bias toward the instruction and every
attention-implementation switch (``bias``), and where the instruction's span ends in a
prompt (``spans``). The algebra is in ``docs/compensation.md``; the setting itself
(``CompensationConfig``) is ``drift_eval.settings``'s; the per-head strengths of
``compensation=head`` are measured by ``drift_eval.measure.calibration``."""
