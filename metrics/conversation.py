"""Scores for a multi-turn conversation that was told to stay in one language (French by default).

Definitions: docs/metrics.md ("Conversations"). ``score_conversation`` returns every
per-conversation value of the conversation tasks.
"""
from __future__ import annotations

from drift_eval.metrics import drift, langid
from drift_eval.metrics.text import repetition

#: the late turns of a conversation: its last three (turns 6-8 of eight)
LATE_TURNS = 3


def reply_language(text: str, lang: str = "fr") -> str:
    """A reply's timeline entry: the segment rule (``langid.label_segments``) on the whole
    reply, as one segment: its language when it is written in one, else ``degenerate`` (a
    loop, made-up words) or ``unreadable`` (an empty reply, code or digits only: a reply of
    code only is no reply in any language)."""
    entry = langid.label_segments([text or ""], target=lang)[0].entry
    return langid.UNREADABLE if entry == langid.CODE else entry


def leaked(text: str, instruction: str = "", lang: str = "fr") -> tuple[int, int]:
    """(leaked instruction words, words) in ``text``: the words inside a restatement or a
    quotation of the instruction (``drift.restated_words``). Ordinary words that also occur
    in instructions ("only", "answer", "language") do not leak on their own, so a reply that
    drifts into English does not raise the count."""
    return drift.restated_words(text, instruction, lang=lang)


def defined_share(values: list) -> float | None:
    """The mean of the values that are defined (not None); None when none is."""
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def score_conversation(replies: list[str], lang: str = "fr", first_turn: int = 1, instruction: str = "") -> dict:
    """Per-turn and whole-conversation scores; turns are numbered from ``first_turn``;
    ``instruction``: the system prompt, whose restatements count as leaks. A turn counts for
    ``lang`` only when its reply is kept (``reply_language`` is ``lang``): a reply in another
    language, a loop, made-up words or an unreadable reply is a turn not kept, and every
    conversation is scored (docs/metrics.md, "Conversations")."""
    languages = [reply_language(r, lang) for r in replies]
    french = [float(x == lang) for x in languages]
    leaks = [leaked(r, instruction, lang) for r in replies]
    echo = [float(drift.restates_instruction(r, instruction, lang=lang)) for r in replies]
    late = echo[1:][-LATE_TURNS:]  # the last three turns, turn 1 left out
    late_echo = sum(late) / len(late) if late else None
    out = {}
    for i, (fr, (lk, n)) in enumerate(zip(french, leaks)):
        t = first_turn + i
        out[f"french_turn_{t}"] = fr
        out[f"leak_turn_{t}"] = 1000.0 * lk / n if n else None
        out[f"words_turn_{t}"] = float(n)
        out[f"echo_turn_{t}"] = echo[i]
    total_words = sum(n for _, n in leaks)
    out.update(
        last3_french=defined_share(french[-3:]),
        all_turns_french=float(drift.kept(languages, lang)),
        time_in_french=drift.time_kept(languages, lang),
        **drift.cause_scores(languages, lang),
        late_echo=late_echo,
        late_echo_minus_first=late_echo - echo[0] if late_echo is not None else None,
        leak_per_1000=1000.0 * sum(lk for lk, _ in leaks) / total_words if total_words else None,
        mean_words=total_words / len(replies) if replies else 0.0,
        repetition=sum(repetition(r) for r in replies) / len(replies) if replies else 0.0,
    )
    return out
