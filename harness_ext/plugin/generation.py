"""What ``hf-drift`` adds to each ``model.generate`` call: one logits processor.

``Watch`` runs last in transformers' processor list, once per generated token, over the
whole batch. It

* records, per row, the *natural end*: the number of tokens generated before the first step
  at which an end-of-sequence token was the most likely token while it was suppressed. It
  looks at the scores before it suppresses anything itself, so it sees what the model
  wanted;
* forces the length: while fewer than ``min_new_tokens`` tokens are generated, it sets the
  end-of-sequence scores to ``-inf`` (what transformers' ``min_new_tokens`` does; ``hf-drift``
  takes ``min_new_tokens`` out of the generation kwargs and does it here instead, because
  transformers' own processor runs before any custom one and would hide the end);
* shows a token-level progress line (tokens done of tokens due, tokens/s, ETA) on a
  terminal, since lm-eval's bar counts whole requests and a batch of 2048-token answers
  otherwise shows nothing for minutes.
"""
from __future__ import annotations

import sys

import torch
from transformers import LogitsProcessor


class Watch(LogitsProcessor):
    def __init__(self, prompt_width: int, eos_ids, min_new_tokens: int = 0, max_new_tokens: int = 0,
                 progress: bool = False, desc: str = "tokens"):
        self.prompt_width = int(prompt_width)
        self.eos = torch.as_tensor(sorted({int(i) for i in eos_ids if i is not None}), dtype=torch.long)
        self.min_new = int(min_new_tokens or 0)
        self.max_new = int(max_new_tokens or 0)
        self.natural_end: list | None = None
        self._bar = None
        self._progress = progress
        self._desc = desc

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_width  # tokens generated so far
        rows = scores.shape[0]
        if self.natural_end is None:
            self.natural_end = [None] * rows
        if self.min_new and step < self.min_new and len(self.eos):
            eos = self.eos.to(scores.device)
            wants_end = torch.isin(scores.argmax(-1), eos).tolist()
            for r, w in enumerate(wants_end):
                if w and self.natural_end[r] is None:
                    self.natural_end[r] = step
            scores = scores.clone()
            scores[:, eos] = -float("inf")
        self._tick(input_ids, step, rows)
        return scores

    # ------------------------------------------------------------------ progress
    def _tick(self, input_ids, step, rows):
        if not self._progress:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=rows * self.max_new if self.max_new else None, desc=self._desc, unit="tok",
                             leave=False, position=1, file=sys.stderr, dynamic_ncols=True)
        if step > 0:  # the token chosen at the previous step is now in input_ids
            self._bar.update(rows)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def show_progress(disable_tqdm: bool, rank: int = 0) -> bool:
    """Token progress only on a terminal, on rank 0, unless lm-eval's bars are off."""
    return not disable_tqdm and rank == 0 and sys.stderr.isatty()


def generated_tokens(out: torch.Tensor, prompt_width: int, eos_ids, pad_id) -> list[int]:
    """Per row, the tokens generated before the first end-of-sequence (or padding) token."""
    cont = out[:, prompt_width:]
    stop = torch.isin(cont, torch.as_tensor(sorted({int(i) for i in [*eos_ids, pad_id] if i is not None}),
                                            dtype=torch.long, device=cont.device))
    width = cont.shape[1]
    first = torch.where(stop.any(1), stop.float().argmax(1), torch.full((cont.shape[0],), width, device=cont.device))
    return [int(x) for x in first.tolist()]
