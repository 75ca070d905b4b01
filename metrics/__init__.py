"""Pure metric maths: language identification, drift scores, α fits, rollout, accessibility
and statistics. No torch, no lm-eval. Definitions: docs/metrics.md and the docs it links."""
