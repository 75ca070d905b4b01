"""Every committed answer of a published run at today's task version, scored again through
lm-eval's task API, gives the values its samples file holds, metric by metric: speeding up
the scoring (or moving it to other processes) changes no published number. Runs at an
earlier task version are left out (their values are that version's); each is counted, so
that the test cannot pass on nothing."""
import glob
import math
import os
from collections import Counter

import pytest
from lm_eval.tasks import get_task_dict

from support.places import REPO

from drift_eval.files import read_json, read_jsonl
from drift_eval.plugin.answers import Answer

ROOT = os.path.join(REPO, "docs", "results")
#: need where the answer wanted to end in characters, which the samples do not hold (the
#: model's tokenizer gives it: ``benchmarks/protocol_runs.py rescore``)
NEEDS_END_CHARS = {"fully_french_before_end", "french_after_end", "fully_target_before_end", "target_after_end"}

pytestmark = pytest.mark.slow


def _task_of(path: str) -> str:
    return os.path.basename(path)[len("samples_"):].rsplit("_", 1)[0]


def _samples_files() -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(ROOT, "**", "samples_drift_*.jsonl"), recursive=True)
                  if _task_of(p).endswith(("_single", "_single_native", "_multiturn", "_multiturn_conflict")))


def _answer(sample: dict) -> Answer:
    """The answer as the backend returned it, from what the sample logged about it."""
    meta = {}
    if isinstance(sample.get("answer_tokens"), (int, float)):
        meta["tokens"] = int(sample["answer_tokens"])
    if sample.get("forced_length") == 1.0:
        meta["forced_length"] = True
    if sample.get("natural_end_observed") == 1.0:
        meta["natural_end"] = None if sample.get("natural_end") is None else int(sample["natural_end"])
    if sample.get("instruction_placement"):
        meta["instruction_placement"] = sample["instruction_placement"]
    return Answer(sample["resps"][0][0], **meta)


def _same(new, old) -> bool:
    if isinstance(new, float) and isinstance(old, float) and math.isnan(new) and math.isnan(old):
        return True
    return (list(new) if isinstance(new, tuple) else new) == old


def test_committed_answers_score_as_published(task_manager):
    files = _samples_files()
    tasks = get_task_dict(sorted({_task_of(p) for p in files}), task_manager)
    scored, differ = Counter(), Counter()
    for path in files:
        name = _task_of(path)
        task = tasks[name]
        versions = {read_json(r, "results file")["versions"].get(name)
                    for r in glob.glob(os.path.join(os.path.dirname(path), "results_*.json"))}
        if versions != {task.config.metadata.get("version")}:
            continue
        for sample in read_jsonl(path, "samples file"):
            values = task.process_results(sample["doc"], [_answer(sample)])
            scored[name] += 1
            for key, value in values.items():
                if key in sample and key not in NEEDS_END_CHARS and not _same(value, sample[key]):
                    differ[f"{os.path.relpath(path, ROOT)} doc {sample['doc_id']}: {key}"] += 1
    assert not differ, f"{len(differ)} values scored differently, e.g. {sorted(differ)[:5]}"
    # every kind of task, in every language, was scored: the published runs at today's version
    assert sum(scored.values()) >= 1500, scored
    kinds = {n.split("_", 2)[-1] for n in scored}
    assert {"single", "multiturn"} <= kinds, kinds
    assert len({n.split("_")[1] for n in scored}) >= 15, sorted(scored)
