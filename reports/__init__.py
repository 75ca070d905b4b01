"""Comparison reports and leaderboards of results folders (``drift-eval report``,
``drift-eval leaderboard``): ``render.py`` (the entry points), ``state.py`` (what the
sections share), ``sections/`` (one module per section kind or task family), ``context.py``,
``templating.py`` and ``templates/`` (Jinja, HTML and Markdown), ``formats.py`` (HTML,
Markdown, JSON, CSV), ``writing.py`` (the files), ``svg.py`` (plots), ``text.py`` (numbers),
``published.py`` (the study's published figures), ``leaderboard.py``."""
