"""A guest in lm-eval: with the plugin installed, a task that is not a drift task scores
exactly as it does without it, alone or beside drift tasks in one run, and a drift run
changes nothing on lm-eval's classes or the user's model."""

import inspect
import sys

import lm_eval
import lm_eval.api.model
import lm_eval.evaluator
import lm_eval.models.huggingface
import lm_eval.tasks
import pytest

from support.commands import LM_EVAL, same_as_without_the_plugin
from support.models import tiny_chat_model

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]

def test_a_template_without_a_system_role_drops_the_system_instruction_as_lm_eval_does(no_system_dir, tmp_path):
    """lm-eval drops a ``--system_instruction`` the template rejects; the plugin leaves
    that choice to lm-eval for every task but its own."""
    want = same_as_without_the_plugin(tmp_path, "hf", f"pretrained={no_system_dir}", "Always answer in French.")
    for sample in want:
        prompt = sample["arguments"]["gen_args_0"]["arg_0"]
        assert "Always answer in French." not in prompt and prompt.startswith("<start_of_turn>user\nWhat is")


def test_a_normal_template_with_a_system_instruction(smollm2_dir, tmp_path):
    want = same_as_without_the_plugin(tmp_path, "hf", f"pretrained={smollm2_dir}", "Always answer in French.")
    assert all(s["arguments"]["gen_args_0"]["arg_0"].startswith("<|im_start|>system\nAlways answer in French.")
               for s in want)


def test_a_normal_template_without_a_system_instruction(smollm2_dir, tmp_path):
    same_as_without_the_plugin(tmp_path, "hf", f"pretrained={smollm2_dir}")


def test_a_drift_run_changes_no_lm_eval_class_and_leaves_the_model_as_it_was(smollm2_dir, tmp_path):
    """In one process: every class lm-eval defines keeps exactly its attributes through a
    run of the drift tasks (single-turn and conversations) on lm-eval's ``hf``, and the
    model object gains none."""
    # deferred, start-up: loads aiohttp
    import lm_eval.models.openai_completions  # noqa: F401  (its classes are checked too)

    def classes():  # every class defined in lm-eval reachable from its modules (bases included)
        found = {klass for name, mod in list(sys.modules.items()) if name == "lm_eval" or name.startswith("lm_eval.")
                 for cls in list(vars(mod).values()) if inspect.isclass(cls) for klass in cls.__mro__}
        return {f"{c.__module__}.{c.__qualname__}": dict(vars(c)) for c in found
                if (c.__module__ or "").startswith("lm_eval")}

    model_dir = tiny_chat_model(tmp_path / "tiny", smollm2_dir)
    before = classes()
    lm = lm_eval.models.huggingface.HFLM(pretrained=model_dir, device="cpu", batch_size=2)
    own = set(vars(lm))
    out = lm_eval.simple_evaluate(model=lm, tasks=["drift_french_single", "drift_french_multiturn"], limit=1,
                                  gen_kwargs={"max_gen_toks": 4}, apply_chat_template=True, log_samples=False)
    assert "fully_french,none" in out["results"]["drift_french_single"]
    assert "all_turns_french,none" in out["results"]["drift_french_multiturn"]
    after = classes()
    changed = sorted(k for k in before if after.get(k) != before[k])
    assert changed == [], changed
    assert set(vars(lm)) == own, sorted(set(vars(lm)) ^ own)
