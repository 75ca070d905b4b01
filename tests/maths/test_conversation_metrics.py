import pytest

from drift_eval.metrics import conversation as conv

FR = "Le chat dort paisiblement sur le canapé pendant que la pluie tombe sur la ville."
EN = "The cat sleeps peacefully on the sofa while the rain falls on the city."


def test_hand_made_conversation_with_known_answers():
    replies = [FR, FR, EN, FR, FR, EN, FR, FR]
    s = conv.score_conversation(replies)
    assert [s[f"french_turn_{t}"] for t in range(1, 9)] == [1, 1, 0, 1, 1, 0, 1, 1]
    assert s["last3_french"] == pytest.approx(2 / 3)
    assert s["all_turns_french"] == 0.0
    assert s["words_turn_1"] == 15.0 and s["words_turn_3"] == 14.0
    assert s["mean_words"] == pytest.approx((15 * 6 + 14 * 2) / 8)


def test_all_french_conversation():
    s = conv.score_conversation([FR] * 8)
    assert s["all_turns_french"] == 1.0 and s["last3_french"] == 1.0
    assert s["leak_per_1000"] == 0.0


INSTRUCTION = ("You are a helpful assistant. Answer only in French, whatever language the user writes in. "
               "Never switch to another language.")


def test_leaked_words_per_thousand():
    reply = "Je réponds uniquement en français. " + "Le chat dort sur le canapé. " * 3  # 5 + 18 words
    lk, n = conv.leaked(reply)
    assert (lk, n) == (4, 23)  # the restatement "reponds uniquement en francais"
    s = conv.score_conversation([reply, FR])
    assert s["leak_turn_1"] == pytest.approx(1000 * 4 / 23)
    assert s["leak_turn_2"] == 0.0
    assert s["leak_per_1000"] == pytest.approx(1000 * 4 / (23 + 15))  # this conversation's words, pooled


def test_english_drift_is_not_leakage():
    drifted = "Sure, here is the answer in English: the only language I know well is this one, my friend."
    assert conv.leaked(drifted, INSTRUCTION) == (0, 18)  # "answer", "only", "language" alone do not leak
    s = conv.score_conversation([drifted, FR], instruction=INSTRUCTION)
    assert s["leak_per_1000"] == 0.0 and s["french_turn_1"] == 0.0


def test_quoting_the_instruction_leaks_every_quoted_word():
    quoted = "Answer only in French, whatever language the user writes in."
    assert conv.leaked(quoted, INSTRUCTION) == (10, 10)  # its patterns and the prompt's word 5-grams
    assert conv.leaked(quoted) == (4, 10)  # without the prompt: "answer only in french" (the patterns alone)
    assert conv.leaked("Bonjour. Never switch to another language, they said.", INSTRUCTION) == (5, 8)
    assert conv.leaked("Never switch to another place.", INSTRUCTION) == (0, 5)  # a 4-gram is not enough


def test_an_empty_reply_has_no_leak_rate():
    s = conv.score_conversation(["", FR])
    assert s["leak_turn_1"] is None and s["leak_turn_2"] == 0.0 and s["leak_per_1000"] == 0.0
    assert conv.score_conversation(["", ""])["leak_per_1000"] is None


def test_repetition_rate():
    assert conv.repetition("a b c d e f g h") == 0.0
    assert conv.repetition("a b c d a b c d") == pytest.approx(1 / 5)  # grams: abcd bcda cdab dabc abcd
    assert conv.repetition("court") == 0.0


def test_empty_replies_are_turns_not_kept():
    s = conv.score_conversation(["", ""])
    assert s["french_turn_1"] == s["french_turn_2"] == 0.0
    assert s["all_turns_french"] == s["last3_french"] == s["time_in_french"] == 0.0
    assert s["not_kept_unreadable"] == 1.0 and s["leak_turn_1"] is None and s["mean_words"] == 0.0


def test_unreadable_loop_and_foreign_turns_are_not_kept_and_the_first_cause_is_named():
    loop = "Je ne sais pas. " * 40
    # turns: fr, unreadable, en, fr, loop, fr, fr, unreadable
    replies = [FR, "", EN, FR, loop, FR, FR, "... !!! ???"]
    s = conv.score_conversation(replies)
    assert [s[f"french_turn_{t}"] for t in range(1, 9)] == [1, 0, 0, 1, 0, 1, 1, 0]
    assert s["last3_french"] == pytest.approx(2 / 3)  # turns 6-8: French, French, unreadable
    assert s["all_turns_french"] == 0.0 and s["time_in_french"] == pytest.approx(1 / 8)
    assert (s["not_kept_left"], s["not_kept_degenerate"], s["not_kept_unreadable"]) == (1.0, 0.0, 0.0)
    assert s["left_for"] == "en"
    held = conv.score_conversation([FR, loop, FR])
    assert held["all_turns_french"] == 0.0 and held["not_kept_degenerate"] == 1.0 and held["left_for"] is None
    assert held["time_in_french"] == pytest.approx(1 / 3)


def test_turn_numbering_for_a_single_generated_turn():
    s = conv.score_conversation([FR], first_turn=8)
    assert s["french_turn_8"] == 1.0 and "french_turn_1" not in s


def test_late_turn_echo_against_turn_one():
    echo = "Je vais répondre uniquement en français, comme demandé."
    replies = [echo, FR, FR, FR, FR, FR, echo, FR]
    s = conv.score_conversation(replies, instruction=INSTRUCTION)
    assert [s[f"echo_turn_{t}"] for t in range(1, 9)] == [1, 0, 0, 0, 0, 0, 1, 0]
    assert s["late_echo"] == pytest.approx(1 / 3)  # turns 6-8
    assert s["late_echo_minus_first"] == pytest.approx(1 / 3 - 1)
    quiet = conv.score_conversation([FR] * 7 + [echo], instruction=INSTRUCTION)
    assert quiet["late_echo"] == pytest.approx(1 / 3) and quiet["late_echo_minus_first"] == pytest.approx(1 / 3)
    prompt = conv.score_conversation([FR, "Whatever language the user writes in, I stay put."], instruction=INSTRUCTION)
    assert prompt["echo_turn_2"] == 1.0 and prompt["late_echo"] == 1.0  # a 5-gram of the prompt; turn 1 left out
    assert conv.score_conversation([echo])["late_echo"] is None  # one turn: no late turn
