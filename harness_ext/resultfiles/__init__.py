"""lm-eval's output files, read and validated, for whoever reads or writes them: one
results file and its samples (``runfile``), a sweep's manifest (``manifest``) and models'
readable names (``names``). Below both ``drift_eval.decide`` (which reads results) and
``drift_eval.plugin.sweep`` (which writes them and checks what it wrote), so that a
writer never imports a reader. Pure Python: no torch, transformers or lm-eval."""
