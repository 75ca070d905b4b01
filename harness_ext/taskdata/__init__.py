"""The drift tasks' data, one module a task family, each with its files beside it:
``french`` (drift_french's requests and conversations, its system prompts and the
compensation's calibration text), ``alpha`` (the α study's scenes and continuations) and
``languages`` (drift_languages' item bank and the instruction worded in each language).
The task glue in ``tasks/`` and the commands read them; they import only the shared
layers below them, and no torch, transformers or lm-eval."""
