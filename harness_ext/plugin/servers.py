"""What an OpenAI-compatible server can tell about its model's end tokens.

A forced length on a llama.cpp-family server (llama-cpp-python's, llama.cpp's own) needs
the ids of every token the model may end its turn with: the server's ``min_tokens`` holds
back one of them only. The server does not say which tokens those are, but it tokenizes
text: each of the end-of-turn markers chat models use is tokenized by the server, and a
marker that is one token of its vocabulary is one of its end tokens. Nothing here is
trusted blindly: the run's forced-length check (``drift_eval.plugin.wrapper``) asks the
server for a forced answer and stops the run if it was not forced.
"""
from __future__ import annotations

from urllib.parse import urlsplit

#: end-of-turn and end-of-text markers of the chat model families served today
END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<end_of_turn>",
               "<eos>", "</s>", "<|end|>", "<|return|>", "<|END_OF_TURN_TOKEN|>", "<|end▁of▁sentence|>")
#: the tokenize endpoints of the llama.cpp family: (path, request body, field of the ids)
ENDPOINTS = (("/extras/tokenize", lambda text: {"input": text}, "tokens"),  # llama-cpp-python
             ("/tokenize", lambda text: {"content": text, "add_special": False, "parse_special": True}, "tokens"))


def server_root(base_url: str) -> str | None:
    """``scheme://host:port`` of an endpoint URL (None when it is not an http(s) URL)."""
    parts = urlsplit(str(base_url))
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else None


def end_token_ids(base_url: str, headers: dict | None = None, timeout: float = 10.0) -> list[int]:
    """The ids of the end markers that the server's model has as single tokens; ``[]``
    when the server has no tokenize endpoint of the llama.cpp family or cannot be asked."""
    import requests  # deferred, start-up: loads requests

    root = server_root(base_url)
    if root is None:
        return []
    for path, body, field in ENDPOINTS:
        def tokens(text, path=path, body=body, field=field):
            r = requests.post(root + path, json=body(text), headers=headers or {}, timeout=timeout)
            r.raise_for_status()
            ids = r.json().get(field)
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise ValueError("not a list of token ids")
            return ids

        try:
            prefix = tokens("")  # what the endpoint adds to every text (a BOS token, or nothing)
            found = set()
            for marker in END_MARKERS:
                ids = tokens(marker)
                if ids[:len(prefix)] == prefix and len(ids) == len(prefix) + 1:
                    found.add(ids[-1])
            return sorted(found)
        except (requests.RequestException, ValueError):
            continue
    return []
