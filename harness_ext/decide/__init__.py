"""Decisions on results: the one results-folder loader (``results``), sweeps (``sweep``),
release gates (``gate``) and the pytest plugin (``pytest_plugin``). Everything but
``sweep`` reads results only and imports no torch."""
