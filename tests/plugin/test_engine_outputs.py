"""The engines' own outputs (``backends.EngineOutputs``, a stand-in for lm-eval's vLLM and SGLang
models during one call): each answer carries the engine's counts, paired by prompt; a
reasoning model's visible answer is counted apart from its trace, its forced answer takes two
requests, and a reasoning that never ends is the whole generation with the marker added."""
from types import SimpleNamespace

from lm_eval.api.instance import Instance

from drift_eval.plugin import backends as b
from drift_eval.plugin import reasoning, wrapper
from drift_eval.plugin.answers import Answer


class VLLM:
    """lm-eval's ``vllm`` model in outline: it encodes each prompt, sends them longest first
    to ``_model_generate`` (vLLM's ``RequestOutput`` each) and hands back text only, in the
    requests' order."""

    def __init__(self):
        self.cache_hook = None

    def tok_encode(self, text):
        return [ord(c) for c in text]

    def _model_generate(self, requests, generate=False, sampling_params=None):
        return [SimpleNamespace(prompt_token_ids=list(ids), num_cached_tokens=len(ids) // 2,
                                outputs=[SimpleNamespace(text="é" * len(ids), token_ids=list(range(len(ids) + 1)))])
                for ids in requests]

    def generate_until(self, requests, disable_tqdm=False):
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i].args[0]))
        outs = self._model_generate([self.tok_encode(requests[i].args[0]) for i in order], generate=True)
        texts = [None] * len(requests)
        for i, o in zip(order, outs):
            texts[i] = o.outputs[0].text[:-1]  # lm-eval's text: cut where a stop sequence was
        return texts


def test_vllm_answers_carry_the_engines_own_counts_paired_by_prompt():
    model = VLLM()
    before = (dict(vars(model)), dict(vars(VLLM)))
    assert b.EngineOutputs.observes(model) and b.backend_of(model).reports_usage
    requests = [Instance("generate_until", {}, (ctx, {}), i) for i, ctx in enumerate(["ab", "abcd", "ab", "a"])]
    answers = b.EngineOutputs.generate(model, requests, disable_tqdm=True)
    assert [str(a) for a in answers] == ["é", "ééé", "é", ""]
    # the generated tokens as vLLM counted them (one more than a count of the text would say)
    assert [a.meta for a in answers] == [
        {"tokens": 3, "prompt_tokens": 2, "cached_prompt_tokens": 1}, {"tokens": 5, "prompt_tokens": 4,
                                                                       "cached_prompt_tokens": 2},
        {"tokens": 3, "prompt_tokens": 2, "cached_prompt_tokens": 1}, {"tokens": 2, "prompt_tokens": 1,
                                                                       "cached_prompt_tokens": 0}]
    assert (dict(vars(model)), dict(vars(VLLM))) == before  # lm-eval's method ran on a stand-in
    assert Answer.from_json(answers[1].to_json()).meta == answers[1].meta
    # a forced length it reports as not reached is not forced
    assert b.answer(model, b.backend_of(model), answers[0], 64, "system").meta["forced_length"] is False


class ReasoningVLLM(VLLM):
    """The outline above for a reasoning model run with ``think_end_token``: the engine
    generates a trace, the marker and the answer; lm-eval returns what follows the marker."""

    think_end_token = "</t>"
    TRACES = {"ab": "xyz</t>", "abcd": "", "abc": "never ends", "abcde": "xy</t>"}
    MERGED = 999  # one token for "xy</t>": the marker written inside another token

    def __init__(self):
        super().__init__()
        self.tokenizer = SimpleNamespace(
            encode=lambda text, add_special_tokens=False: self.tok_encode(text),
            decode=lambda ids: "".join("xy</t>" if i == self.MERGED else chr(i) for i in ids))

    def _model_generate(self, requests, generate=False, sampling_params=None):
        out = []
        for ids in requests:
            prompt = "".join(map(chr, ids))
            raw = self.TRACES[prompt] + "é" * len(ids)
            tokens = [self.MERGED] + self.tok_encode(raw[6:]) if prompt == "abcde" else self.tok_encode(raw)
            out.append(SimpleNamespace(prompt_token_ids=list(ids), num_cached_tokens=0,
                                       outputs=[SimpleNamespace(text=raw, token_ids=tokens)]))
        return out

    def generate_until(self, requests, disable_tqdm=False):
        outs = self._model_generate([self.tok_encode(r.args[0]) for r in requests], generate=True)
        return [o.outputs[0].text.split(self.think_end_token)[-1] for o in outs]


def test_a_reasoning_models_count_is_of_its_visible_answer_and_the_trace_is_counted_apart():
    model = ReasoningVLLM()
    requests = [Instance("generate_until", {}, (ctx, {}), i) for i, ctx in enumerate(["ab", "abcd", "abc", "abcde"])]
    answers = b.EngineOutputs.generate(model, requests)
    assert [str(a) for a in answers] == ["éé", "éééé", "never endsééé", "ééééé"]
    # the marker inside another token: lm-eval cut the text there all the same; the answer is
    # counted from its text and the trace is the rest
    assert answers[3].meta["tokens"] == 5 and answers[3].meta["trace_tokens"] == 1
    assert answers[0].meta["tokens"] == 2 and answers[0].meta["trace_tokens"] == 3 + 4  # "xyz" and "</t>"
    assert answers[0].meta["trace"] == "xyz" and answers[3].meta["trace"] == "xy"
    assert answers[1].meta["tokens"] == 4 and "trace_tokens" not in answers[1].meta
    # it never ended its reasoning: lm-eval hands all of it on as the answer, and so it is counted
    assert answers[2].meta["tokens"] == 13 and "trace_tokens" not in answers[2].meta
    # the minimum counted the trace too: the visible answer fell short, and the sample says so
    assert b.answer(model, b.backend_of(model), answers[0], 4, "system").meta["forced_length"] is False
    assert b.answer(model, b.backend_of(model), answers[1], 4, "system").meta["forced_length"] is True
    assert reasoning.reasoning_marker(model) == [ord(c) for c in "</t>"] and reasoning.reasoning_marker(VLLM()) == []


class TwoStepVLLM(VLLM):
    """The outline above for a reasoning model whose end-of-reasoning marker is one token
    ("|"): unforced, it reasons ("why"), ends its reasoning and answers briefly; continued
    after its reasoning, it writes as many tokens as the minimum asks. A prompt ending in
    "?" gets a plain answer, with no reasoning."""

    think_end_token = "|"

    def __init__(self):
        super().__init__()
        self.sent = []  # (prompt, generation kwargs) of every request, in order
        self.tokenizer = SimpleNamespace(encode=lambda text, add_special_tokens=False: self.tok_encode(text),
                                         decode=lambda ids: "".join(map(chr, ids)))

    def _model_generate(self, requests, generate=False, sampling_params=None):
        out = []
        for ids, gen in zip(requests, sampling_params):
            prompt = "".join(map(chr, ids))
            raw = ("é" * gen["min_tokens"] if "min_tokens" in gen else
                   "plain" if prompt.endswith("?") else "why|short")
            out.append(SimpleNamespace(prompt_token_ids=list(ids), num_cached_tokens=0,
                                       outputs=[SimpleNamespace(text=raw, token_ids=self.tok_encode(raw))]))
        return out

    def generate_until(self, requests, disable_tqdm=False):
        self.sent.extend((r.args[0], dict(r.args[1])) for r in requests)
        outs = self._model_generate([self.tok_encode(r.args[0]) for r in requests], generate=True,
                                    sampling_params=[r.args[1] for r in requests])
        return [o.outputs[0].text.split(self.think_end_token)[-1] for o in outs]


def test_a_reasoning_models_forced_answer_takes_two_requests_the_second_forced_after_its_reasoning():
    """docs/backends.md, "Reasoning models": the first request is unforced and lets the
    model reason; the second continues the prompt and that reasoning with the visible
    answer, forced to the whole length, the one-token marker held back with the end of
    text. The answer is the second's, with the first's trace; an unforced request takes one."""
    model = TwoStepVLLM()
    lm = wrapper.DriftLM(model, {"t"}, chat=False)
    doc = {"system_prompt": "Answer in French."}
    greedy = {"until": [], "do_sample": False, "temperature": 0.0}
    forced = dict(greedy, max_gen_toks=20, min_new_tokens=8)
    requests = [Instance("generate_until", doc, ("Answer in French. Tell me.", forced), 0, task_name="t"),
                Instance("generate_until", doc, ("Answer in French. Plain?", forced), 1, task_name="t"),
                Instance("generate_until", doc, ("Answer in French. Free.", dict(greedy, max_gen_toks=64,
                                                                                 min_new_tokens=0)), 2, task_name="t")]
    answers = lm.generate_drift(requests, model)
    # the unforced request went once, as it came; the forced ones twice
    assert [p for p, _ in model.sent] == ["Answer in French. Free.", "Answer in French. Tell me.",
                                          "Answer in French. Plain?", "Answer in French. Tell me.why|",
                                          "Answer in French. Plain?"]
    first, second = model.sent[1], model.sent[3]
    assert "min_tokens" not in first[1] and "min_new_tokens" not in first[1] and first[1]["max_gen_toks"] == 20
    assert (second[1]["min_tokens"], second[1]["max_gen_toks"], second[1]["stop_token_ids"]) == (8, 8, [ord("|")])
    reasoned, plain, free = answers
    assert str(reasoned) == "é" * 8 and reasoned.meta == {
        "tokens": 8, "prompt_tokens": len("Answer in French. Tell me.why|"), "cached_prompt_tokens": 0,
        "forced_length": True, "instruction_placement": "plain", "trace": "why", "trace_tokens": 4,
        "trace_raw": "why|", "trace_ended": True}
    # no reasoning: the second request is the plain forced one, and the answer has no trace
    assert str(plain) == "é" * 8 and plain.meta["forced_length"] is True and "trace" not in plain.meta
    assert str(free) == "short" and "forced_length" not in free.meta and "trace_ended" not in free.meta
    assert Answer.from_json(reasoned.to_json()).meta == reasoned.meta


def test_a_reasoning_that_never_ends_is_the_whole_generation_with_the_marker_added():
    model = SimpleNamespace(think_end_token="</think>", tokenizer=SimpleNamespace(
        encode=lambda text, add_special_tokens=False: text.split(), decode=lambda ids: " ".join(ids)))
    opened = reasoning.unfinished_reasoning(model, "assistant:\n<think>\n", "still weighing it up")
    assert opened == {"trace_raw": "still weighing it up\n</think>", "trace": "still weighing it up",
                      "trace_tokens": 4}
    assert reasoning.unfinished_reasoning(model, "assistant:\n", "<think> a plan")["trace"] == "a plan"
    # not opened, or ended: no reasoning left unfinished
    assert reasoning.unfinished_reasoning(model, "assistant:\n", "Bonjour") == {}
    assert reasoning.unfinished_reasoning(model, "<think>", "done </think> Bonjour") == {}
    assert reasoning.reasoning_of(model, ["one", "two", "</think>", "Bonjour"]) == {
        "trace_raw": "one two </think>", "trace": "one two", "trace_tokens": 3}


class SGLangLM:
    """lm-eval's ``sglang`` model in outline: it encodes each prompt, sends the token ids
    longest first to ``_model_generate`` as ``requests=`` (SGLang's offline engine returns a
    dict per prompt: its text, ``output_ids`` where it gives them, and ``meta_info`` with
    its counts) and hands back text only, cut after ``think_end_token``."""

    think_end_token = None

    def __init__(self, with_ids=True):
        self.cache_hook, self.with_ids = None, with_ids
        self.tokenizer = SimpleNamespace(encode=lambda text, add_special_tokens=False: self.tok_encode(text),
                                         decode=lambda ids: "".join(map(chr, ids)))

    def tok_encode(self, text):
        return [ord(c) for c in text]

    def _model_generate(self, requests=None, generate=False, sampling_params=None):
        out = []
        for ids in requests:
            text = "why|" + "é" * len(ids) if self.think_end_token else "é" * len(ids)
            o = {"text": text, "meta_info": {"completion_tokens": len(text) + 1, "cached_tokens": 1,
                                             "prompt_tokens": len(ids)}}
            if self.with_ids:
                o["output_ids"] = self.tok_encode(text) + [0]  # and the end of text, which the text leaves out
            out.append(o)
        return out

    def generate_until(self, requests, disable_tqdm=False):
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i].args[0]))
        outs = self._model_generate(requests=[self.tok_encode(requests[i].args[0]) for i in order], generate=True,
                                    sampling_params=[{} for _ in order])
        texts = [None] * len(requests)
        for i, o in zip(order, outs):
            texts[i] = o["text"].split(self.think_end_token)[-1] if self.think_end_token else o["text"]
        return texts


def test_sglang_answers_carry_the_engines_own_counts_paired_by_prompt():
    requests = [Instance("generate_until", {}, (ctx, {}), i) for i, ctx in enumerate(["ab", "abcd"])]
    for with_ids in (True, False):
        model = SGLangLM(with_ids)
        assert b.EngineOutputs.observes(model) and b.backend_of(model).reports_usage
        answers = b.EngineOutputs.generate(model, requests, disable_tqdm=True)
        assert [str(a) for a in answers] == ["éé", "éééé"]
        # SGLang's count, with the end of text: one more than a count of the text would say
        assert [a.meta for a in answers] == [{"tokens": 3, "prompt_tokens": 2, "cached_prompt_tokens": 1},
                                             {"tokens": 5, "prompt_tokens": 4, "cached_prompt_tokens": 1}]
    # a reasoning model: the trace is cut from the engine's token ids, and the answer counted apart
    model = SGLangLM()
    model.think_end_token = "|"
    [answer, _] = b.EngineOutputs.generate(model, requests, disable_tqdm=True)
    assert answer.meta["trace"] == "why" and answer.meta["trace_tokens"] == 4 and answer.meta["tokens"] == 3
    assert b.answer(model, b.backend_of(model), answer, 5, "system").meta["forced_length"] is False
