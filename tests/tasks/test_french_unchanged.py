"""drift_french is the published protocol: the scoring code it shares with drift_languages
must give every committed real answer exactly the scores of its task version
(tests/data/french_scores_reference.json, from tests/support/french_reference.py: task 4.2), and a
short real run must log exactly the samples it logged then."""
import json
import os

import pytest

from support import french_reference
from support.commands import LM_EVAL, run_lm_eval, samples_of


def test_committed_french_answers_score_exactly_as_before():
    with open(french_reference.REFERENCE, encoding="utf-8") as fh:
        reference = json.load(fh)
    now = json.loads(json.dumps(french_reference.scores(), ensure_ascii=False, sort_keys=True))
    assert len(reference["single"]) >= 30 and len(reference["conversations"]) >= 200
    for kind in ("single", "conversations"):
        assert now[kind].keys() == reference[kind].keys()
        changed = [k for k in reference[kind] if now[kind][k] != reference[kind][k]]
        assert not changed, (kind, changed[:3])


@pytest.mark.slow
@pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")
def test_drift_french_samples_are_unchanged_on_a_short_run(smollm2_dir, tmp_path):
    """The same short run as tests/data/drift_french_short_run.json (written by the code
    before drift_languages landed): every sample, key by key, prompts, answers, hashes and
    per-sample metrics."""
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "drift_french",
                     "--apply_chat_template", "--limit", "2", "--gen_kwargs", "max_gen_toks=48", "--batch_size", "4",
                     "--device", "cpu", "--output_path", out, "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    with open(os.path.join(os.path.dirname(french_reference.REFERENCE), "drift_french_short_run.json"),
              encoding="utf-8") as fh:
        reference = json.load(fh)
    for task, before in reference.items():
        now = samples_of(out, task)
        assert len(now) == len(before) == 2
        for a, b in zip(before, now):
            assert [k for k in set(a) | set(b) if a.get(k) != b.get(k)] == [], (task, a["doc_id"])
