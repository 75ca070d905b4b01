"""A sweep's manifest, ``sweep.json``: the settings and tasks a ``drift-eval sweep`` planned
(written by ``drift_eval.plugin.sweep``, read by it on resume and by the results loader)."""
from __future__ import annotations

import os

from drift_eval.errors import DamagedFile
from drift_eval.files import read_json

MANIFEST = "sweep.json"


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def read_manifest(root: str) -> dict | None:
    """``root/sweep.json`` (None when absent), validated."""
    path = os.path.join(root, MANIFEST)
    if not os.path.lexists(path):
        return None
    remedy = "delete it (finished settings are kept) and rerun the sweep"
    manifest = read_json(path, "sweep manifest", remedy=remedy, expect=dict)
    if not _str_list(manifest.get("settings")) or not _str_list(manifest.get("tasks", [])) \
            or not isinstance(manifest.get("options", {}), dict):
        raise DamagedFile(path, f"{path} is not a sweep manifest (a 'settings' and a 'tasks' list, an 'options' "
                                f"object): {remedy}")
    return manifest
