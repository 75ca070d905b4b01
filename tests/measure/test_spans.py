import pytest
from transformers import AutoTokenizer

from drift_eval.compensation.spans import system_span_end, token_count_before
from drift_eval.taskdata.french import system_prompt

pytestmark = pytest.mark.slow

SYSTEM = system_prompt("en")


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    return AutoTokenizer.from_pretrained(smollm2_dir)


def _chat(tokenizer, system=SYSTEM, user="Tell me about cats."):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def test_span_from_document_field(tokenizer):
    prompt = _chat(tokenizer)
    end = system_span_end(prompt, tokenizer, SYSTEM)
    assert prompt[:end].endswith(SYSTEM)


def test_span_from_chat_template_alone(tokenizer):
    prompt = _chat(tokenizer, system="Sois bref.\n\nRéponds en français.")
    end = system_span_end(prompt, tokenizer)
    assert prompt[:end].endswith("Réponds en français.")


def test_no_system_turn_means_no_span(tokenizer):
    assert system_span_end("Tell me about cats.", tokenizer) is None


def test_token_count_stops_at_the_end_of_the_system_text(tokenizer):
    prompt = _chat(tokenizer)
    end = system_span_end(prompt, tokenizer, SYSTEM)
    n = token_count_before(prompt, end, tokenizer, add_special_tokens=False)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids[:n]).endswith(SYSTEM)
    assert tokenizer.convert_ids_to_tokens(ids[n]) == "<|im_end|>"
