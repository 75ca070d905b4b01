"""Measurements inside a model (torch): reading activations (``capture``), per-head
dilution exponents (``calibration``), hidden-state α and continuation perplexity
(``alpha``, served for lm-eval by ``alpha_serving``), free-generation decodability (``decode``), positional-bias rollout inputs
(``position_bias``) and soft-prompt cramming (``cramming``). The maths they feed is in
``drift_eval.metrics``; a model's parts are found by ``drift_eval.anatomy``."""
