"""Comparison reports (Jinja templates); arrives with the sweep and report commands."""
