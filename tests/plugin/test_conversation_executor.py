"""The conversation executor on the real SmolLM2-135M-Instruct through hf-drift."""
import json

import pytest
from lm_eval.api.instance import Instance

from drift_eval.conversation import ConversationSpec, assistant_replies
from drift_eval.errors import DriftUsageError
from drift_eval.plugin.conversations import run_conversations as _run
from drift_eval.plugin.model import HFDriftLM
from drift_eval.plugin.request_types import CONVERSATION
from drift_eval.plugin.wrapper import DriftLM
from drift_eval.taskdata.french import system_prompt

pytestmark = pytest.mark.slow

SYSTEM = system_prompt("en")
TURNS = [["Hello! Who are you?", "What is your favourite colour?", "Why?"],
         ["Tell me about the sea.", "And the mountains?", "Which do you prefer?"],
         ["Give me a recipe for soup.", "Make it vegetarian.", "How long does it cook?"]]
GEN = {"until": [], "max_gen_toks": 8, "do_sample": False}


@pytest.fixture(scope="module")
def lm(smollm2_dir):
    return HFDriftLM(pretrained=smollm2_dir, compensation="log", strength=0.5, device="cpu", batch_size=8)


def _requests(specs):
    return [Instance(CONVERSATION.name, {"system_prompt": s.system_prompt}, (s.to_json(), dict(GEN)), 0)
            for s in specs]


def run_conversations(lm, requests):
    """The executor on ``lm`` as a drift run's model serves it (``DriftLM``)."""
    return _run(DriftLM(lm, set()), requests)


class Recorder:
    """Wraps an LM's generate_until to keep the prompts of every call."""

    def __init__(self, lm):
        self.lm, self.calls = lm, []

    def apply_chat_template(self, *a, **k):
        return self.lm.apply_chat_template(*a, **k)

    def generate_until(self, reqs, disable_tqdm=False):
        out = self.lm.generate_until(reqs, disable_tqdm=disable_tqdm)
        self.calls.append([(r.args[0], o) for r, o in zip(reqs, out)])
        return out


def test_history_at_turn_k_holds_exactly_the_models_earlier_replies(lm):
    specs = [ConversationSpec(SYSTEM, t) for t in TURNS]
    rec = Recorder(lm)
    histories = run_conversations(rec, _requests(specs))
    assert len(rec.calls) == 3 and all(len(c) == 3 for c in rec.calls)  # turn k: one batched call
    for i, spec in enumerate(specs):
        replies = assistant_replies(histories[i])
        assert len(replies) == 3
        for k in range(3):
            messages = [{"role": "system", "content": SYSTEM}]
            for j in range(k):
                messages += [{"role": "user", "content": spec.user_turns[j]}, {"role": "assistant", "content": replies[j]}]
            messages.append({"role": "user", "content": spec.user_turns[k]})
            want = lm.apply_chat_template(messages, add_generation_prompt=True)
            prompt, reply = rec.calls[k][i]
            assert prompt == want and reply == replies[k]


def test_batched_executor_matches_one_conversation_at_a_time(lm):
    specs = [ConversationSpec(SYSTEM, t) for t in TURNS]
    together = [assistant_replies(h) for h in run_conversations(lm, _requests(specs))]
    alone = [assistant_replies(run_conversations(lm, _requests([s]))[0]) for s in specs]
    assert together == alone


def test_reinjection_restates_the_instruction_every_k_turns(lm):
    spec = ConversationSpec(SYSTEM, ["u1", "u2", "u3", "u4", "u5"], reinject_every=2)
    assert [spec.reinjected(t) for t in range(1, 6)] == [False, False, True, False, True]
    assert spec.user_message(3) == f"{SYSTEM}\n\nu3" and spec.user_message(2) == "u2"
    rec = Recorder(lm)
    run_conversations(rec, _requests([ConversationSpec(SYSTEM, TURNS[0], reinject_every=2)]))
    assert rec.calls[2][0][0].count(SYSTEM) == 2 and rec.calls[1][0][0].count(SYSTEM) == 1


def test_fixed_history_generates_only_the_last_turn(lm):
    spec = ConversationSpec(SYSTEM, TURNS[1], mode="fixed", scripted_replies=["Bonjour.", "D'accord."])
    rec = Recorder(lm)
    [history] = run_conversations(rec, _requests([spec]))
    assert len(rec.calls) == 1
    replies = assistant_replies(history)
    assert replies[:2] == ["Bonjour.", "D'accord."] and len(replies) == 3
    assert "D'accord." in rec.calls[0][0][0]


def test_hf_drift_serves_the_request_type_as_json(lm):
    [out] = lm.generate_conversation(_requests([ConversationSpec(SYSTEM, TURNS[2][:2])]), disable_tqdm=True)
    messages = json.loads(out)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]


def test_bad_specs_are_clear_errors():
    with pytest.raises(DriftUsageError, match="mode"):
        ConversationSpec(SYSTEM, ["a"], mode="replay")
    with pytest.raises(DriftUsageError, match="reinject_every"):
        ConversationSpec(SYSTEM, ["a"], reinject_every=-1)
    with pytest.raises(DriftUsageError, match="scripted reply"):
        ConversationSpec(SYSTEM, ["a", "b", "c"], mode="fixed", scripted_replies=["x"])
