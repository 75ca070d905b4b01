"""The function that serves each drift request type (``drift_eval.plugin.request_types``),
by reference: the one table through which the wrapper a drift run gets
(``drift_eval.plugin.wrapper.DriftLM``) and ``hf-drift``'s methods
(``drift_eval.plugin.model``) dispatch. Each is called as ``serve(lm, requests,
disable_tqdm=False)`` and returns one answer per request. It imports the measurements,
and so torch, which the records themselves do not; the wrapper imports it when a run first
serves a drift request type."""
from __future__ import annotations

from drift_eval.measure import alpha_serving, cramming, decode, position_bias
from drift_eval.plugin import conversations
from drift_eval.plugin.request_types import (ACCESSIBILITY, CONTINUATION_NLL, CONVERSATION, FREE_GENERATION,
                                             POSITION_PROFILE, PROMPT_OFFSETS, TYPES)

SERVERS = {
    CONVERSATION.name: conversations.serve,
    POSITION_PROFILE.name: position_bias.serve,
    PROMPT_OFFSETS.name: alpha_serving.serve_offsets,
    CONTINUATION_NLL.name: alpha_serving.serve_nll,
    ACCESSIBILITY.name: cramming.serve,
    FREE_GENERATION.name: decode.serve,
}
assert SERVERS.keys() == TYPES.keys(), "every request type has one serving function"
