"""Comparison reports of a results folder: ``render.py`` (context and Jinja rendering),
``svg.py`` (inline plots), ``templates/`` (HTML and Markdown). Used by ``drift-eval report``."""
