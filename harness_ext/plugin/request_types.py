"""The lm-eval request types that ``hf-drift`` serves beyond lm-eval's own, with what each
needs from the model (for the one-line error other models give) and the shape of its
answer (what a cache checks before it hands a stored answer back)."""

CONVERSATION = "generate_conversation"
POSITION_PROFILE = "position_profile"
PROMPT_OFFSETS = "prompt_offsets"
CONTINUATION_NLL = "continuation_nll"
ACCESSIBILITY = "accessibility"
FREE_GENERATION = "free_generation"

NEEDS = {
    CONVERSATION: "feeds the model's replies back as conversation history",
    POSITION_PROFILE: "reads attention weights and gradients inside the model",
    PROMPT_OFFSETS: "reads hidden states of teacher-forced prompt pairs",
    CONTINUATION_NLL: "scores continuations under the compensation bias toward the prompt",
    ACCESSIBILITY: "optimises soft-prompt input vectors against the frozen model",
    FREE_GENERATION: "samples free generations and reads their hidden states at the window centres",
}

#: the answer of each drift request type is JSON text: a list of chat messages
#: (``generate_conversation``), or an object with at least these keys
ANSWER_KEYS = {
    POSITION_PROFILE: ("lambdas", "gradient", "profiles", "comparison"),
    PROMPT_OFFSETS: ("axis", "centres", "signal", "noise"),
    CONTINUATION_NLL: ("nll", "tokens"),
    ACCESSIBILITY: ("accessibility", "n50", "line", "bound"),
}


def check_answer(request_type: str, text: str) -> None:
    """Raise ``ValueError`` unless ``text`` has the documented shape of a
    ``request_type`` answer (for the drift request types above)."""
    import json

    if not isinstance(text, str):
        raise ValueError(f"a {request_type} answer is text, not {type(text).__name__}")
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"a {request_type} answer is JSON text") from None
    if request_type == CONVERSATION:
        if not isinstance(obj, list) or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in obj):
            raise ValueError("a conversation answer is a list of {role, content} messages")
    elif request_type in ANSWER_KEYS:
        if not isinstance(obj, dict) or any(k not in obj for k in ANSWER_KEYS[request_type]):
            raise ValueError(f"a {request_type} answer is an object with {', '.join(ANSWER_KEYS[request_type])}")
    else:
        raise ValueError(f"unknown request type {request_type}")
