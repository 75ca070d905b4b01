"""The folder a ``drift-eval sweep`` writes (``drift_eval.plugin.sweep``): its manifest
(the planned settings and options, ``sweep.json``), each setting's completeness on resume,
the moving aside of damaged or unfinished files, and the publishing of a staged run under
the model's readable folder name (samples first, the results file last)."""
from __future__ import annotations

import glob
import os
import shutil

from drift_eval.errors import DriftUsageError
from drift_eval.files import move_aside, write_json_atomic
from drift_eval.resultfiles.manifest import MANIFEST, read_manifest
from drift_eval.resultfiles.names import model_name
from drift_eval.resultfiles.runfile import read_run_file

#: the hidden staging folder's prefix: lm-eval's tracker writes a setting's files there first
STAGING = ".partial-"


def check_manifest(output: str, options: dict) -> list:
    """Settings an earlier run of this sweep planned; refuses a sweep with other options."""
    old = read_manifest(output)
    if old is None:
        return []
    diff = [k for k in options if old.get("options", {}).get(k) != options[k]]
    if diff:
        raise DriftUsageError(f"{output} holds a sweep run with other options ({', '.join(diff)} differ): "
                              f"rerun with the same options, or use another --output")
    return list(old["settings"])


def write_manifest(output: str, labels: list, options: dict) -> None:
    write_json_atomic(os.path.join(output, MANIFEST),
                      {"settings": labels, "tasks": options["tasks"], "options": options}, indent=2)


def run_files(folder: str) -> list:
    return sorted(glob.glob(os.path.join(glob.escape(folder), "*", "results_*.json")) +
                  glob.glob(os.path.join(glob.escape(folder), "*", "samples_*.jsonl")))


def complete(folder: str, label: str, tasks: list, log) -> bool:
    """Whether ``folder`` holds a valid results file of setting ``label`` with every task
    (and samples for every task that is not a group). Damaged files are reported; beside a
    complete run they are moved aside at once (a setting that is not complete runs again,
    and ``clear`` moves them then)."""
    complete, damaged = False, []
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*", "results_*.json"))):
        try:
            rf = read_run_file(path)
        except DriftUsageError as exc:
            log(f"damaged: {exc.message.split('; ')[0]}")
            damaged.append(path)
            continue
        if not complete and rf.setting == label and all(t in rf.tasks for t in tasks) \
                and all(tr.is_group or tr.samples is not None for tr in rf.tasks.values()):
            complete = True
        else:
            damaged.append(path)
    if complete:
        for path in damaged:  # with their samples (same date)
            date = os.path.basename(path)[len("results_"):-len(".json")]
            samples = glob.glob(os.path.join(glob.escape(os.path.dirname(path)), f"samples_*_{glob.escape(date)}.jsonl"))
            for f in [path, *samples]:
                log(f"moved aside: {os.path.relpath(move_aside(f), os.path.dirname(folder))}")
    return complete


def clear(folder: str, log) -> None:
    """Before a setting runs again: move its earlier (incomplete or damaged) files aside
    and drop staging folders that a killed run left."""
    for path in run_files(folder):
        log(f"moved aside: {os.path.relpath(move_aside(path), os.path.dirname(folder))}")
    for stale in glob.glob(os.path.join(glob.escape(folder), STAGING + "*")):
        shutil.rmtree(stale, ignore_errors=True)


def model_folder(model_args: dict, res: dict) -> str:
    """The name of a run's model folder: its readable name (``model_name``) with the
    characters that lm-eval replaces in folder names (``/``, ``:``, ...) made ``__``, and no
    leading dot (a hidden folder is not read)."""
    from lm_eval.utils import sanitize_model_name  # deferred, start-up: loads jinja2, lm_eval, numpy, requests, yaml

    return sanitize_model_name(model_name(model_args, res)).lstrip(".") or "model"


def publish(staging: str, folder: str) -> str:
    """Check the staged run through the results loader, then rename its files into
    ``folder/<model_folder>``: samples first, the results file last. Returns the results
    file's path."""
    [staged] = glob.glob(os.path.join(glob.escape(staging), "*", "results_*.json")) or [None]
    if staged is None:
        raise DriftUsageError(f"lm-eval wrote no results file under {staging}: is the disk full?")
    rf = read_run_file(staged)  # the files as written, checked like any reader would
    model_dir = os.path.join(folder, model_folder(rf.model_args, rf.raw))
    os.makedirs(model_dir, exist_ok=True)
    for path in [*rf.sample_files, staged]:
        os.replace(path, os.path.join(model_dir, os.path.basename(path)))
    shutil.rmtree(staging, ignore_errors=True)
    return os.path.join(model_dir, os.path.basename(staged))
