"""The lm-eval request types that ``hf-drift`` serves beyond lm-eval's own, with what each
needs from the model (for the one-line error other models give)."""

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
