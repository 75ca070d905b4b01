"""The protocol-runs script's own steps: a control task paired with its plain task document
by document (benchmarks/paired_tables.py), and a published run that keeps every generated
answer whole (benchmarks/protocol_runs.py)."""
import json

import pytest

from drift_eval.errors import DriftUsageError
from support.checks import benchmark
from support.handmade_results import write_task_run


def test_pair_compares_two_tasks_document_by_document(tmp_path):
    """A control task against the plain task on the same documents: the paired difference
    and its exact McNemar p (6 discordant pairs, all one way: p = 2 / 64)."""
    tables = benchmark("paired_tables")
    plain = [1, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    control = [1, 1, 1, 1, 1, 1, 1, 1, 1, 0]
    write_task_run(str(tmp_path / "plain"), "m", plain, task="plain_task", metric="french_turn_8")
    write_task_run(str(tmp_path / "control"), "m", control, task="control_task", metric="french_last_turn")
    table = tables.pair(str(tmp_path / "control"), "control_task", str(tmp_path / "plain"), "plain_task",
                        ["french_last_turn=french_turn_8"])
    row = table.splitlines()[2]
    assert row.startswith("| french_last_turn=french_turn_8 | 0.900 ") and "| 0.300 " in row
    assert "+0.600 [" in row and "p 0.031 (exact McNemar, 10)" in row
    with pytest.raises(DriftUsageError, match="control has 0 runs of control_task under log:0.25"):
        tables.pair(str(tmp_path / "control"), "control_task", str(tmp_path / "plain"), "plain_task",
                    ["french_turn_8"], setting="log:0.25")


def test_publish_keeps_generated_answers_whole_and_cuts_teacher_forced_continuations(tmp_path):
    """A published run can be scored again: every answer and every conversation turn is
    copied whole; only the bundled continuations of teacher-forced requests are cut."""
    runs = benchmark("protocol_runs")
    answer = "Bonjour. " * 400
    turns = json.dumps([{"role": "system", "content": "Réponds en français."}, {"role": "user", "content": "Hi"},
                        {"role": "assistant", "content": "Salut ! " * 300}], ensure_ascii=False)
    forced = {"gen_args_0": {"arg_0": json.dumps({"continuations": ["mot " * 500]}), "arg_1": {}}}
    src = tmp_path / "run" / "none" / "m"
    src.mkdir(parents=True)
    rows = [{"doc_id": 0, "resps": [[answer]], "filtered_resps": [answer], "arguments": {}},
            {"doc_id": 1, "resps": [[turns]], "filtered_resps": [turns], "arguments": forced}]
    (src / "samples_t_2026-01-01T00-00-00.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs.publish(str(tmp_path / "run"), str(tmp_path / "pub"))
    out = [json.loads(x) for x in (tmp_path / "pub" / "none" / "m" / "samples_t_2026-01-01T00-00-00.jsonl").open()]
    assert out[0]["resps"] == [[answer]] and out[0]["filtered_resps"] == [answer]
    assert out[1]["resps"] == [[turns]] and out[1]["filtered_resps"] == [turns]
    kept = json.loads(out[1]["arguments"]["gen_args_0"]["arg_0"])["continuations"][0]
    assert kept.startswith("mot mot") and kept.endswith("[... 1400 more characters]") and len(kept) < 700
