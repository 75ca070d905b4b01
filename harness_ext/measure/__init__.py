"""Measurements inside a model (torch): finding its blocks and reading activations
(``capture``), multi-turn conversations (``conversation``), hidden-state α and continuation
perplexity (``alpha``), positional-bias rollout inputs (``position_bias``) and soft-prompt
cramming (``cramming``). The maths they feed is in ``drift_eval.metrics``."""
