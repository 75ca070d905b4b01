"""The plugin's one logger, ``lm_eval.drift``: a child of lm-eval's own logger, so that
lm-eval's handler, its format and ``--verbosity`` (or ``LMEVAL_LOG_LEVEL``) show the
plugin's lines as they show lm-eval's. Where lm-eval has set up no logging (a script that
imports the plugin), Python shows its warnings on stderr and keeps its INFO lines quiet.

Warnings say what a run could not do as asked (a template without a system role, a cache
that did not fit); INFO says what a run did (how much of the conversations it carried).
"""
from __future__ import annotations

import logging

log = logging.getLogger("lm_eval").getChild("drift")
