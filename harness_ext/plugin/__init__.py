"""The lm-eval glue: the ``hf-drift`` model (``model``), the drift request types
(``request_types``), the base task class (``task_base``), plugin discovery
(``registration``, with ``drift_eval._startup``) and local model files (``local_models``)."""
