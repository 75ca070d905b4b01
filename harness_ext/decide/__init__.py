"""Decisions on results, pure Python: the one results-folder loader (``results``),
candidate-against-baseline comparisons (``compare``), release gates (``gate``) and the
pytest plugin (``pytest_plugin``). Nothing here imports torch, transformers or lm-eval."""
