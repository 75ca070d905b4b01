"""Pure metric maths: language identification and drift scores. No torch, no lm-eval."""
