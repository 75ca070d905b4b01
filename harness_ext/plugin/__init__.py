"""The lm-eval glue: the ``hf-drift`` model (``model``), the drift request types
(``request_types``), the wrapper a run with drift tasks hands ``evaluate`` (``wrapper``),
what each backend needs (``backends``), the instruction in chat templates (``chat``),
conversations (``conversations``), the base task class (``task_base``), plugin discovery
(``registration``, with ``drift_eval._startup``), sweeps and their answer cache (``sweep``,
``answer_cache``), what each ``generate`` call gets (``generation``), answers with
metadata (``answers``) and local model files (``local_models``)."""
