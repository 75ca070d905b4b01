"""A run is read with the metric definitions it was run with: lm-eval writes each task's
config (``metric_list`` and its ``report:`` hints) into the results JSON, and ``report``,
``compare``, ``gate`` and ``leaderboard`` read that (``drift_eval.catalogue.recorded``),
not today's task YAMLs; results that record none are read with today's, and the loader
says so."""
import copy
import glob
import json
import logging
import os
import pathlib

import pytest

from support.handmade_results import write_output
from support.places import REPO

from drift_eval import tasks
from drift_eval.catalogue import recorded
from drift_eval.decide.results import load_output
from drift_eval.errors import DamagedFile
from drift_eval.reports.leaderboard import markdown as leaderboard
from drift_eval.reports.render import render


def _changed_yamls(monkeypatch, edits: dict):
    """Today's task YAMLs with ``edits`` (``{(task, metric): {key: value}}``) made to their
    metric entries, as if the YAMLs were edited after the run."""
    parsed = tasks._parsed_documents()

    def edited():
        out = []
        for family, path, doc in parsed:
            doc = copy.deepcopy(doc)
            for e in doc.get("metric_list") or []:
                e.update(edits.get((doc.get("task"), e.get("metric")), {}))
            out.append((family, path, doc))
        return tuple(out)

    monkeypatch.setattr(tasks, "_parsed_documents", edited)


#: the edits: directions turned round, a share declared a count, a conditional metric made
#: unconditional (metrics whose direction the handmade results' ``higher_is_better`` leaves out)
EDITS = {("drift_french_multiturn", "last3_french"): {"higher_is_better": False},
         ("drift_french_multiturn", "all_turns_french"): {"higher_is_better": False},
         ("drift_french_single", "time_in_french"): {"report": {"role": ["summary", "key", "time"],
                                                                 "values": "count"}}}


def _outputs(root) -> tuple:
    output = load_output(root)
    return (render(output, "md"), leaderboard(output), output.catalogue["drift_french_multiturn"]["last3_french"],
            output.compare("drift_french_single", "time_in_french", "log:0.25"),
            output.metric("drift_french_single", "time_in_french").binary)


def test_changing_a_direction_in_the_yaml_after_a_run_changes_nothing_the_run_reports(tmp_path, monkeypatch):
    root = write_output(tmp_path / "out")
    before = _outputs(root)
    assert before[2]["higher_is_better"] is True and before[4] is False
    _changed_yamls(monkeypatch, EDITS)
    assert tasks.metric_catalogue()["drift_french_multiturn"]["last3_french"]["higher_is_better"] is False
    assert _outputs(root) == before


def test_results_that_record_no_definitions_are_read_with_todays_and_the_loader_says_so(tmp_path, monkeypatch,
                                                                                        caplog):
    """The same edits change the report of results without ``configs``: the check above is
    not blind, and the fallback is announced."""
    root = write_output(tmp_path / "out")
    for path in pathlib.Path(root).glob("*/*/results_*.json"):
        doc = json.loads(path.read_text())
        doc.pop("configs")
        path.write_text(json.dumps(doc))
    before = _outputs(root)
    _changed_yamls(monkeypatch, EDITS)
    with caplog.at_level(logging.WARNING, logger="lm_eval.drift"):
        after = _outputs(root)
    assert after[2]["higher_is_better"] is False
    shown = "drift\\_french\\_multiturn: French in the last three turns "
    assert shown + "↑" in before[0] and shown + "↓" in after[0] and shown + "↑" not in after[0]
    said = [r.getMessage() for r in caplog.records if "today's task definitions" in r.getMessage()]
    assert said and "drift_french_multiturn" in said[0] and "drift_french_single" in said[0]


def test_what_a_metric_means_is_the_runs_and_how_it_is_shown_is_todays():
    """The run's direction, kind and conditional partner; today's label and layout roles for
    the metrics today's YAMLs still define; a task of another package is left out."""
    today = tasks.metric_catalogue()
    res = {"configs": {
        "drift_french_single": {"metadata": {"version": 4.3, "lm_eval_drift_version": "0.1.0"}, "metric_list": [
            {"metric": "fully_french", "higher_is_better": False, "report": "key"},
            {"metric": "drift_given_start", "higher_is_better": True},
            {"metric": "retired_metric", "higher_is_better": True, "report": {"role": "summary", "label": "old"}}]},
        "arc_easy": {"metadata": {"version": 1.0}, "metric_list": [{"metric": "acc", "higher_is_better": True}]}},
        "group_subtasks": {"drift_french": ["drift_french_single"]},
        "groups": {"drift_french": {"alias": "drift_french", "fully_french,none": 0.5, "fully_french_stderr,none": 0.1}},
        "higher_is_better": {"drift_french": {"fully_french": False}}}
    cat = recorded(res, "results.json", today)
    assert set(cat) == {"drift_french_single", "drift_french"}
    full = cat["drift_french_single"]["fully_french"]
    assert full["higher_is_better"] is False
    assert full["label"] == today["drift_french_single"]["fully_french"]["label"]
    assert full["roles"] == today["drift_french_single"]["fully_french"]["roles"]
    assert cat["drift_french_single"]["drift_given_start"]["conditional"] is None  # the run recorded none
    assert today["drift_french_single"]["drift_given_start"]["conditional"] is not None
    assert cat["drift_french_single"]["retired_metric"]["label"] == "old"
    assert cat["drift_french"] == {"fully_french": {**cat["drift_french"]["fully_french"], "roles": ("headline",),
                                                    "higher_is_better": False}}


def test_every_published_run_records_its_definitions():
    """Every committed results file records the definitions of each of its drift tasks."""
    root = os.path.join(REPO, "docs", "results")
    files = glob.glob(os.path.join(root, "**", "results_*.json"), recursive=True)
    assert files
    today = tasks.metric_catalogue()
    for path in files:
        with open(path, encoding="utf-8") as fh:
            res = json.load(fh)
        cat = recorded(res, path, today)
        assert set(res["configs"]) <= set(cat), path


def test_a_malformed_recorded_definition_is_one_damaged_file_line(tmp_path):
    root = write_output(tmp_path / "out", settings=("none",))
    [path] = pathlib.Path(root).glob("none/*/results_*.json")
    doc = json.loads(path.read_text())
    doc["configs"]["drift_french_single"]["metric_list"][0]["report"] = {"role": "no-such-role"}
    path.write_text(json.dumps(doc))
    with pytest.raises(DamagedFile) as err:
        load_output(root)
    assert str(path) in err.value.message and "no-such-role" in err.value.message
    assert len(err.value.message.splitlines()) == 1


@pytest.mark.parametrize("entry, needle", [
    ({"report": {"role": 5}}, "a report role is a name"),
    ({"report": {"role": ["key", ["nested"]]}}, "a report role is a name"),
    ({"higher_is_better": "yes"}, "higher_is_better is true, false or null"),
    ({"report": {"role": "key", "values": "percentage"}}, "values is share"),
])
def test_a_recorded_definition_of_the_wrong_type_is_one_damaged_file_line(tmp_path, entry, needle):
    """A results file is input: a recorded definition that is not one (a role that is not a
    name, a direction that is not a boolean, an unknown kind) names the file, never a
    traceback and never a guess."""
    root = write_output(tmp_path / "out", settings=("none",))
    [path] = pathlib.Path(root).glob("none/*/results_*.json")
    doc = json.loads(path.read_text())
    doc["configs"]["drift_french_single"]["metric_list"][0].update(entry)
    path.write_text(json.dumps(doc))
    with pytest.raises(DamagedFile) as err:
        load_output(root)
    assert str(path) in err.value.message and needle in err.value.message
    assert len(err.value.message.splitlines()) == 1
