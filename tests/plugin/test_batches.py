"""A long drift ``generate_until`` call is handed to the model one of lm-eval's own batches at
a time (``drift_eval.plugin.batches``), so that each batch's answers are scored while the
next is generated: the model sees the very batches one call would make, and gives the same
answers."""
import dataclasses

import pytest
from lm_eval.tasks import TaskManager

from drift_eval.plugin import backends, batches
from drift_eval.plugin.model import HFDriftLM
from drift_eval.plugin.wrapper import DriftLM


class Recording(HFDriftLM):
    """hf-drift, keeping the token ids of every batch it generates."""

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        self.seen.append(context.tolist())
        return super()._model_generate(context, max_length, stop, **generation_kwargs)


def _requests(lm, n: int, tokens: int):
    task = TaskManager().load(["drift_french_single"])["tasks"]["drift_french_single"]
    task.build_all_requests(limit=n, rank=0, world_size=1, apply_chat_template=True,
                            chat_template=lm.apply_chat_template)
    out = []
    for inst in task.instances:  # a short forced length, so that the test takes seconds
        gen = {**inst.args[1], "max_gen_toks": tokens, backends.FORCE_KWARG: tokens}
        out.append(dataclasses.replace(inst, arguments=(inst.args[0], gen)))
    return task, out


@pytest.mark.slow
def test_batch_by_batch_makes_the_batches_and_answers_of_one_call(smollm2_dir):
    lm = Recording.create_from_arg_obj({"pretrained": smollm2_dir}, {"batch_size": 3, "device": "cpu"})
    lm.seen = []
    task, requests = _requests(lm, 7, 12)
    assert len({len(lm.tok_encode(r.args[0])) for r in requests}) > 1  # prompts of several lengths: padding
    wrapper = DriftLM(lm, {"drift_french_single": task})

    one = wrapper.generate_drift(requests, lm)  # the whole call at once, as before
    one_batches, lm.seen = lm.seen, []
    plan = batches.lm_eval_batches(lm, "hf-drift", wrapper._prepared(requests)[0])
    assert [len(b) for b in plan] == [3, 3, 1] and sorted(i for b in plan for i in b) == list(range(7))
    by_batch = wrapper.generate_until(requests)

    assert lm.seen == one_batches  # the same three batches, token for token, in the same order
    assert [str(a) for a in by_batch] == [str(a) for a in one]
    assert [a.meta for a in by_batch] == [a.meta for a in one]
    assert all(a.meta["tokens"] == 12 for a in by_batch)


def test_batches_are_not_planned_where_lm_eval_sizes_them_itself():
    class Auto:
        batch_size = "auto"

        def tok_encode(self, text):
            return text.split()

    assert batches.lm_eval_batches(Auto(), "hf", []) is None
    Auto.batch_size = 4
    assert batches.lm_eval_batches(Auto(), "local-completions", []) is None  # a server: sent concurrently
    assert batches.lm_eval_batches(Auto(), "sglang", []) is None
