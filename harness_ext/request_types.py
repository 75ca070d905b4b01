"""The lm-eval request types that ``hf-drift`` serves beyond lm-eval's own, with what each
needs from the model (for the one-line error other models give)."""

CONVERSATION = "generate_conversation"
POSITION_PROFILE = "position_profile"

NEEDS = {
    CONVERSATION: "feeds the model's replies back as conversation history",
    POSITION_PROFILE: "reads attention weights and gradients inside the model",
}
