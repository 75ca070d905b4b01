"""The run's time accounts (``drift_eval.plugin.progress``): generation and scoring apart, the
time left at the rate so far, and no more than one progress line every ``EVERY`` seconds."""
import time

from drift_eval.plugin import progress
from drift_eval.plugin.answers import Answer


def test_duration_reads_as_people_write_it():
    assert [progress.duration(s) for s in (0, 48.4, 185, 3725, -3)] == ["0 s", "48 s", "3 min 05 s", "1 h 02 min",
                                                                       "0 s"]


def test_progress_lines_count_tokens_estimate_the_time_left_and_are_spaced(monkeypatch):
    clock = progress.RunClock()
    clock.generated(10.0, [Answer("a", tokens=100), Answer("b", tokens=300), Answer("c", tokens=0)])
    first = clock.line("drift_fr_single", 3, 9, 1)
    assert first == ("drift_fr_single: 3 of 9 answers generated (400 tokens, 40 tokens/s); about 20 s left; "
                     "1 of 3 scored while generating")  # 10 s for 3 answers: 6 more take 20 s
    assert clock.line("drift_fr_single", 4, 9, 1) is None  # within EVERY seconds of the last line
    assert clock.line("drift_fr_single", 9, 9, None, force=True) == \
        "drift_fr_single: 9 of 9 answers generated (400 tokens, 40 tokens/s)"
    monkeypatch.setattr(progress, "EVERY", 0.0)
    assert clock.line("drift_fr_single", 5, 9, 2) is not None


def test_the_summary_says_how_much_scoring_was_left_after_generation():
    clock = progress.RunClock()
    clock.generated(2.0, [Answer("a", tokens=64)] * 4)
    for _ in range(4):
        clock.scored(0.01)
    clock.scored_aside(0.5)
    time.sleep(0.05)
    line = clock.summary()
    assert "generation 2.0 s (4 answers, 256 tokens)" in line
    assert "scoring: 4 documents, 0.5 s of CPU in the scoring processes" in line
    assert "0.04 s in the main process after generation" in line
    clock.generated(1.0, ['{"a conversation": "its length is no one number"}'])
    assert "(5 answers, 256 tokens in the 4 of known length)" in clock.summary()
    assert clock.line("drift_fr_multiturn", 1, 2, None, force=True) == \
        "drift_fr_multiturn: 1 of 2 answers generated; about 1 s left"  # no token count for all of them
    clock.reset()
    assert "generation 0.0 s (0 answers, 0 tokens)" in clock.summary()
