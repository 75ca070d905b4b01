import copy
import inspect
import json
import pickle
from unittest import mock

import pytest
from lm_eval.api.metrics import aggregate_subtask_metrics, mean

import drift_eval.settings as module
from drift_eval.conversation import ConversationSpec
from drift_eval.errors import DriftUsageError
from drift_eval.plugin.answers import Answer, meta_of
from drift_eval.plugin.registration import upstream_reads
from drift_eval.taskdata.french import CONFLICT_REQUEST
from drift_eval.tasks import metric_catalogue
from drift_eval.tasks.drift_french import utils
from support.prose import FRENCH


def test_single_turn_docs_carry_their_system_prompt():
    en = utils.load_single_turn("en")["test"]
    fr = utils.load_single_turn("fr")["test"]
    assert len(en) == len(fr) >= 32
    assert len({d["request"] for d in en}) == len(en)  # all requests differ
    assert "French" in en[0]["system_prompt"] and "français" in fr[0]["system_prompt"]


def test_conversation_docs_and_their_options():
    docs = utils.load_conversations(reinject_every=3, num_conversations=5, version=1.0)["test"]
    assert len(docs) == 5
    spec = ConversationSpec.from_json(docs[0]["spec"])
    assert len(spec.user_turns) == 8 and spec.reinject_every == 3 and spec.mode == "live"
    full = utils.load_conversations()["test"]
    assert len(full) == 32
    assert len({json.loads(d["spec"])["user_turns"][0] for d in full}) == 32
    fixed = ConversationSpec.from_json(utils.load_conversations(mode="fixed")["test"][0]["spec"])
    assert len(fixed.scripted_replies) == 7


@pytest.mark.parametrize("kwargs", [dict(num_conversations=0), dict(num_conversations=99),
                                    dict(prompt_language="de"), dict(mode="replay")])
def test_bad_task_options_are_clear_errors(kwargs):
    with pytest.raises(DriftUsageError):
        utils.load_conversations(**kwargs)


def test_registration_steps_aside_where_lm_eval_reads_the_group_itself():
    assert not upstream_reads("lm_eval.models", module)
    with mock.patch.object(inspect, "getsource", return_value='eps = entry_points(group="lm_eval.models")'):
        assert upstream_reads("lm_eval.models", module)
        assert not upstream_reads("lm_eval.tasks", module)


def test_answers_carry_their_metadata_through_copies_and_json():
    a = Answer("Bonjour tout le monde", tokens=5, natural_end=3, forced_length=True)
    assert a == "Bonjour tout le monde" and json.dumps(a) == '"Bonjour tout le monde"'
    for b in (copy.deepcopy(a), pickle.loads(pickle.dumps(a)), Answer.from_json(json.loads(json.dumps(a.to_json())))):
        assert isinstance(b, Answer) and b == a and b.meta == a.meta
    assert meta_of("plain text") == {}
    for bad in ({"text": 1}, {"text": "x", "tokens": "3"}, {"text": "x", "forced_length": 1}, {"text": "x", "other": 1}, []):
        with pytest.raises(ValueError):
            Answer.from_json(bad)


def test_conflict_docs_carry_the_users_request_at_their_turn():
    docs = utils.load_conversations(conflict_turn=5, num_conversations=2)["test"]
    for d in docs:
        turns = ConversationSpec.from_json(d["spec"]).user_turns
        assert turns[4].endswith(CONFLICT_REQUEST) and sum(CONFLICT_REQUEST in t for t in turns) == 1
    replies = ["Bonjour, je vais bien, merci beaucoup."] * 4 + ["Hello, I am fine, thank you very much."] * 4
    messages = [{"role": "system", "content": "sys"}]
    for r in replies:
        messages += [{"role": "user", "content": "q"}, {"role": "assistant", "content": r}]
    scores = utils.process_conflict({"conflict_turn": 5}, [json.dumps(messages)])
    assert scores["french_before_request"] == 1.0 and scores["french_after_request"] == 0.0


def test_informational_metrics_have_no_direction():
    cat = metric_catalogue()
    informational = {
        "drift_french_single": ["natural_end", "natural_end_share", "answer_tokens", "forced_length",
                                "natural_end_observed", "instruction_placement", "left_for"],
        "drift_french_multiturn": [f"words_turn_{t}" for t in range(1, 9)] + ["mean_words", "left_for"],
        "drift_french_multiturn_conflict": ["mean_words", "words_turn_5", "left_for"],
        "drift_french_multiturn_fixed": ["words_last_turn", "left_for"],
        "drift_decode_detail": ["trajectories", "samples_per_prompt", "t_centres", "switches_base"],
        "accessibility": ["eps", "radius_r", "bound_C"],
    }
    for task, metrics in informational.items():
        for m in metrics:
            assert cat[task][m]["higher_is_better"] is None, (task, m)
    assert cat["drift_french_single"]["fully_french"]["higher_is_better"] is True
    assert cat["drift_french_multiturn"]["leak_per_1000"]["higher_is_better"] is False


def test_the_group_headline_weighs_tasks_by_their_documents_and_counts_every_sample():
    """lm-eval's own aggregation of drift_score, on per-sample values as the tasks write them:
    every sample has one (an unreadable or looping answer a 0), each task's mean is over all
    its samples, and the group weighs each task by its document count (docs/metrics.md)."""
    single = [utils.process_results({"system_prompt": "s"}, [a]) for a in
              [FRENCH[0] + "\n\n" + FRENCH[1], "! ! ! ! ! !", "The cat sleeps on the sofa while the rain falls.",
               "Le chat dort. " * 60]]
    assert [s["drift_score"] for s in single] == [1.0, 0.0, 0.0, 0.0]
    values = [s["drift_score"] for s in single]  # what lm-eval collects
    assert mean(values) == 0.25
    # with a conversation task of 2 documents whose mean is 1: (0.25 x 4 + 1 x 2) / 6
    assert aggregate_subtask_metrics([mean(values), 1.0], [len(single), 2], weight_by_size=True) == pytest.approx(0.5)
