"""The conversation cache of ``hf-drift`` (``conversation_cache=on``): each conversation
keeps its keys and values between turns, and a turn prefills only what follows the part of
its prompt already computed. Its answers are those of re-encoding every turn, token for
token, on tiny random models of three families (llama; qwen2; gemma3_text, whose
sliding-window layers drop states the next turn needs), with and without compensation, at
batch sizes 1 and 4, with conversations of different lengths in one batch; and its logits
are those of re-encoding within float32 rounding (the carried states of generated tokens
were computed one token at a time, re-encoding computes them in one matrix product, so the
sums run in another order)."""
import contextlib
import re
from types import SimpleNamespace

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

from drift_eval.conversation import ConversationSpec, assistant_replies
from drift_eval.errors import DriftUsageError
from drift_eval.plugin import generation
from drift_eval.plugin.conversations import run_conversations
from drift_eval.plugin.generation import ConversationStore, cache_kwarg, carried_cache, seed
from drift_eval.plugin.request_types import CONVERSATION
from drift_eval.plugin.wrapper import DriftLM
from drift_eval.settings import CompensationConfig

from drift_eval.plugin.answers import meta_of
from drift_eval.plugin.model import HFDriftLM
from drift_eval.plugin.run_check import conversation_cache_of, run_problems
from support.commands import last_line, run_lm_eval, samples_of
from support.models import forward_sums, rounding, tiny_chat_model

FAMILIES = ("llama", "qwen2", "gemma3_text")
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# a template that rewrites every earlier turn when a message is added (it counts them first)
COUNTING = "{{ messages | length }} messages\n" + CHATML
SYSTEM = "Always answer in French, whatever the user writes."
CORPUS = [SYSTEM, "Hello! Who are you? Tell me about the sea. And the mountains?",
          "Give me a recipe for soup and make it vegetarian.", "the river ran past the mill and under the old bridge"]
TURNS = [["Hello! Who are you?", "Tell me about the sea.", "Why?"],
         ["Give me a recipe for soup.", "Make it vegetarian."],
         ["the river ran past", "the mill", "and under the old stone bridge", "ok"],
         ["Hi", "And the mountains?", "Hey"],
         ["x y z", "a b c"]]
GEN = {"until": [], "max_gen_toks": 5, "do_sample": False}


def chat_tokenizer(template=CHATML):
    """A byte-level BPE tokenizer (320 tokens, merges learnt from ``CORPUS``, so that a
    reply may re-tokenise differently from how it was generated) with a ChatML template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = template
    return fast


def chat_model_dir(folder, family, template=CHATML):
    """A 2-layer random model of ``family`` with ``chat_tokenizer``, saved to ``folder``;
    gemma3_text alternates a sliding-window layer (8 positions) with a full one."""
    tok = chat_tokenizer(template)
    kw = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=1024, initializer_range=0.2,
              eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    if family == "gemma3_text":  # untied, with a query scale for its head size: else its greedy answers are one token
        kw.update(head_dim=8, sliding_window=8, query_pre_attn_scalar=8, tie_word_embeddings=False,
                  layer_types=["sliding_attention", "full_attention"])
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(family, **kw), dtype=torch.float32).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module", params=FAMILIES)
def lm(request, tmp_path_factory):
    folder = chat_model_dir(tmp_path_factory.mktemp(request.param), request.param)
    return HFDriftLM(pretrained=folder, device="cpu", batch_size=4)


def _requests(turns=TURNS, gen=GEN):
    return [Instance(CONVERSATION.name, {"system_prompt": SYSTEM}, (ConversationSpec(SYSTEM, t).to_json(), dict(gen)), 0)
            for t in turns]


def _run(lm, mode, batch_size, requests=None):
    """(the conversations, the store the call used or None) with ``conversation_cache=mode``."""
    stores = []
    real = lm.carried_conversations

    @contextlib.contextmanager
    def spy(*args):
        with real(*args) as store:
            stores.append(store)
            yield store

    lm.conversation_cache, lm.batch_size_per_gpu = mode, batch_size
    lm.carried_conversations = spy  # this test's own model object
    try:
        histories = run_conversations(DriftLM(lm, set()), requests or _requests())
    finally:
        del lm.carried_conversations
        lm.conversation_cache = "off"
    return histories, stores[0]


@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("setting", ["none", "log:0.5"])
def test_carried_conversations_answer_as_re_encoded_ones(lm, setting, batch_size):
    lm.set_compensation(CompensationConfig.from_label(setting))
    off, none = _run(lm, "off", batch_size)
    on, store = _run(lm, "on", batch_size)
    assert none is None and store is not None
    assert [assistant_replies(h) for h in on] == [assistant_replies(h) for h in off]
    assert on == off  # the whole logged conversation: no cache_reused mark where the cache was used
    assert store.carried > store.positions // 3  # most of each later prompt came from the carried states
    assert set(store.reused.values()) <= {True}


@pytest.mark.parametrize("setting", ["const:0.5", "head:0.5", "log:0.5@prompt"])
def test_every_compensation_shape_and_span_answers_as_re_encoding(lm, setting):
    """``const`` and ``span=prompt`` bias a query differently from one turn to the next, so
    only the positions before the span end are carried; ``head`` carries all."""
    if lm.drift_state.head_gammas is None:
        layers, heads = lm.model.config.num_hidden_layers, lm.model.config.num_attention_heads
        lm.drift_state.head_gammas = torch.linspace(0.2, 1.5, layers * heads).reshape(layers, heads)
    lm.set_compensation(CompensationConfig.from_label(setting))
    off, _ = _run(lm, "off", 4)
    on, store = _run(lm, "on", 4)
    assert [assistant_replies(h) for h in on] == [assistant_replies(h) for h in off]
    assert store.carried > 0


def test_forced_reinjected_scripted_and_duplicate_conversations_in_one_batch(lm):
    """Forced answers (the end held back by ``generation.Watch``), the instruction restated
    in later turns, a scripted history, and two identical conversations (the same prompt
    twice in one batch): still the answers of re-encoding."""
    lm.set_compensation(CompensationConfig.from_label("log:0.5"))
    specs = [ConversationSpec(SYSTEM, TURNS[0]), ConversationSpec(SYSTEM, TURNS[0]),
             ConversationSpec(SYSTEM, TURNS[2], reinject_every=2),
             ConversationSpec(SYSTEM, TURNS[3], mode="fixed", scripted_replies=["Bonjour.", "D'accord."])]
    gen = {**GEN, "min_new_tokens": GEN["max_gen_toks"]}
    requests = [Instance(CONVERSATION.name, {"system_prompt": SYSTEM}, (s.to_json(), dict(gen)), 0) for s in specs]
    off, _ = _run(lm, "off", 4, requests)
    on, store = _run(lm, "on", 4, requests)
    assert on == off and store.carried > 0


def test_a_template_that_rewrites_earlier_turns_is_re_encoded_and_marked(tmp_path, drift_log):
    lm = HFDriftLM(pretrained=chat_model_dir(tmp_path / "m", "llama", COUNTING), device="cpu", batch_size=4)
    off, _ = _run(lm, "off", 4)
    on, store = _run(lm, "on", 4)
    assert [assistant_replies(h) for h in on] == [assistant_replies(h) for h in off]
    assert store.carried == 0
    for h, turns in zip(on, TURNS):
        marks = [m.get("cache_reused") for m in h if m["role"] == "assistant"]
        assert marks == [None] + [False] * (len(turns) - 1)  # turn 1 had nothing to reuse
    warned = [r for r in drift_log.records if "rewrote earlier turns" in r.getMessage()]
    assert len(warned) == 1  # one line per run, not per turn


def test_carried_logits_equal_re_encoded_ones_within_float32_rounding(lm):
    """One batch of two prompts of different lengths, generated with the carried cache; the
    next prompts (each row's prompt, its answer and new tokens) prefilled from the held
    states give the logits of a full re-encoding, position for position, under the bias."""
    model, state = lm.model, lm.drift_state
    lm.set_compensation(CompensationConfig.from_label("log:0.5"))
    g = torch.Generator().manual_seed(3)
    first = [torch.randint(3, 300, (n,), generator=g) for n in (14, 9)]
    width = max(len(p) for p in first)
    ids = torch.stack([torch.cat([torch.zeros(width - len(p), dtype=torch.long), p]) for p in first])
    mask = (torch.arange(width)[None] >= torch.tensor([width - len(p) for p in first])[:, None]).long()
    spans = [5, 5]
    store = ConversationStore("log")
    cache = carried_cache(model.config, width + 6)
    state.set_rows(spans, mask.sum(1).tolist(), 6)
    try:
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                             pad_token_id=0, **{cache_kwarg(model): cache})
        store.keep([0, 1], out, cache, width, mask, [6, 6], spans)
        rows = [torch.cat([out[i, width - len(p):], torch.randint(3, 300, (4 + 3 * i,), generator=g)])
                for i, p in enumerate(first)]
        W = max(len(r) for r in rows)
        ids = torch.stack([torch.cat([torch.zeros(W - len(r), dtype=torch.long), r]) for r in rows])
        mask = (torch.arange(W)[None] >= torch.tensor([W - len(r) for r in rows])[:, None]).long()
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        state.set_rows(spans, mask.sum(1).tolist(), 1)
        with torch.no_grad():
            full = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
            X, states = store.prefix([0, 1], ids, mask, spans)
            assert X > width  # more than the first turn's prompts: its answers are carried too
            cache = carried_cache(model.config, W)
            seed(cache, states)
            part = model(input_ids=ids[:, X:], attention_mask=mask, position_ids=positions[:, X:],
                         **{cache_kwarg(model): cache}).logits
    finally:
        state.clear_rows()
    real = mask[:, X:].bool()
    want, got = full[:, X:][real], part[real]
    tol = rounding(torch.float32, forward_sums(model, W), float(want.abs().max()))
    assert (got - want).abs().max() <= tol
    assert torch.equal(got.argmax(-1), want.argmax(-1))


# ---------------------------------------------------------------------------- lm-eval's own hf model
@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    """lm-eval's ``HFLM`` on each family's tiny model, as ``--model hf`` builds it."""
    return {f: HFLM(pretrained=chat_model_dir(tmp_path_factory.mktemp(f"stock_{f}"), f), device="cpu", batch_size=4)
            for f in FAMILIES}


def _stock_run(model, mode, batch_size, requests=None):
    """(the conversations, the store the call used or None) through the wrapper, as a run
    with ``--metadata '{"conversation_cache": mode}'`` makes it."""
    stores = []
    model.batch_size_per_gpu = batch_size
    drift_lm = DriftLM(model, set(), conversation_cache=(mode, 8192))
    carrier = drift_lm.carried_conversations()
    assert (carrier is None) == (mode == "off")

    state = dict(vars(model))

    @contextlib.contextmanager
    def spy(*args):
        with carrier(*args) as store:
            stores.append(store)
            # the turns go through a stand-in for the model; the model object is left as it is
            assert store is None or store.target.stands_for is model
            yield store
            assert vars(model) == state

    drift_lm.carried_conversations = lambda: spy if carrier is not None else None  # this test's own wrapper
    histories = run_conversations(drift_lm, requests or _requests())
    assert vars(model) == state
    return histories, stores[0] if stores else None


@pytest.mark.parametrize("chat", [False, True])
def test_a_conversations_turns_are_placed_as_chat_turns_whatever_the_runs_flag(stock, chat):
    """Every turn is rendered with the chat template, so its instruction sits in a chat turn
    (the system message here), also in a run without ``--apply_chat_template``."""
    histories = run_conversations(DriftLM(stock["llama"], set(), chat=chat), _requests())
    placed = [meta_of(m["content"]).get("instruction_placement") for h in histories for m in h
              if m["role"] == "assistant"]
    assert placed and set(placed) == {"system"}, placed


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("batch_size", [1, 4])
def test_stock_hf_carried_conversations_answer_as_re_encoded_ones(stock, family, batch_size):
    model = stock[family]
    off, none = _stock_run(model, "off", batch_size)
    on, store = _stock_run(model, "on", batch_size)
    assert none is None and store is not None
    assert on == off  # the answers, token for token, and no cache_reused mark
    assert store.carried > store.positions // 3
    assert set(store.reused.values()) <= {True}
    forced = {**GEN, "min_new_tokens": GEN["max_gen_toks"]}  # the length forced through lm-eval's own kwarg
    assert _stock_run(model, "auto", batch_size, _requests(gen=forced))[0] == \
        _stock_run(model, "off", batch_size, _requests(gen=forced))[0]


def test_the_runs_metadata_sets_the_stock_cache_and_is_checked(stock, monkeypatch):
    def tasks(*metas):
        return {f"t{i}": SimpleNamespace(config=SimpleNamespace(metadata=m)) for i, m in enumerate(metas)}

    assert conversation_cache_of(tasks({}, None)) == ("off", 8192)
    assert conversation_cache_of(tasks({"conversation_cache": "AUTO", "conversation_cache_mb": "64"})) == ("auto", 64)
    with pytest.raises(DriftUsageError, match="unknown conversation_cache 'yes'"):
        conversation_cache_of(tasks({"conversation_cache": "yes"}))
    with pytest.raises(DriftUsageError, match="different conversation_cache settings"):
        conversation_cache_of(tasks({"conversation_cache": "on"}, {}))
    assert DriftLM(stock["llama"], set(), conversation_cache=("off", 8192)).carried_conversations() is None

    class Server:  # a model of no Hugging Face kind
        def apply_chat_template(self, messages, add_generation_prompt=True):
            return "".join(m["content"] for m in messages)

    conversation = {"c": SimpleNamespace()}
    monkeypatch.setattr("drift_eval.plugin.run_check.request_types", lambda task, name: {CONVERSATION.name})
    [line] = run_problems(Server(), conversation, True, "on")
    assert "carries conversations on hf and hf-drift only" in line
    assert run_problems(Server(), conversation, True, "auto") == []  # auto re-encodes where it cannot carry
    assert run_problems(stock["qwen2"], conversation, True, "on") == []


# ---------------------------------------------------------------------------- the parts


def test_over_the_cap_on_stops_and_auto_re_encodes(lm, drift_log):
    lm.set_compensation(CompensationConfig.from_label("none"))
    lm.conversation_cache_mb = 1
    big = {**GEN, "max_gen_toks": 10**6}
    try:
        specs = [ConversationSpec.from_json(r.args[0]) for r in _requests(gen=big)]
        assert lm.conversation_bytes(specs, [big] * len(specs)) > 2**20
        lm.conversation_cache = "on"
        with pytest.raises(DriftUsageError, match="over conversation_cache_mb=1"):
            with lm.carried_conversations(specs, [big] * len(specs)):
                pass
        lm.conversation_cache = "auto"
        with lm.carried_conversations(specs, [big] * len(specs)) as store:
            assert store is None
        assert any("each turn is re-encoded" in r.getMessage() for r in drift_log.records)
    finally:
        lm.conversation_cache, lm.conversation_cache_mb = "off", 8192


def test_past_the_cap_at_run_time_the_rest_is_re_encoded(lm, monkeypatch, drift_log):
    lm.set_compensation(CompensationConfig.from_label("none"))
    off, _ = _run(lm, "off", 4)
    real = generation.ConversationStore.__init__

    def tiny_cap(self, mode="none", limit=None, warn=None):
        real(self, mode, 1, warn)  # one byte: the first batch already outgrows it

    monkeypatch.setattr(generation.ConversationStore, "__init__", tiny_cap)
    on, store = _run(lm, "on", 4)
    assert store.stopped and not store.held and store.carried == 0
    assert [assistant_replies(h) for h in on] == [assistant_replies(h) for h in off]
    assert sum("outgrew" in r.getMessage() for r in drift_log.records) == 1


# ---------------------------------------------------------------------------- the bundled model
SMOL_TURNS = [["Hello! Who are you?", "What is your favourite colour?", "Why?"],
              ["Tell me about the sea.", "And the mountains?", "Which do you prefer?"],
              ["Give me a recipe for soup.", "Make it vegetarian.", "How long does it cook?"],
              ["Name a French city.", "What is it known for?", "Thanks."]]


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["none", "log:0.5"])
def test_smollm2_carried_conversations_answer_as_re_encoded_ones(smollm2_dir, setting):
    """4 conversations x 3 turns on SmolLM2-135M-Instruct (its own chat template), batch 4."""
    lm = HFDriftLM(pretrained=smollm2_dir, device="cpu", batch_size=4,
                   compensation=CompensationConfig.from_label(setting).mode, strength=0.5)
    requests = _requests(SMOL_TURNS, {"until": [], "max_gen_toks": 24, "do_sample": False})
    off, _ = _run(lm, "off", 4, requests)
    on, store = _run(lm, "on", 4, requests)
    assert [assistant_replies(h) for h in on] == [assistant_replies(h) for h in off]
    assert on == off
    assert store.carried > store.positions // 3 and set(store.reused.values()) <= {True}


@pytest.mark.slow
def test_lm_eval_hf_with_the_cache_in_metadata_logs_the_samples_of_re_encoding(smollm2_dir, tmp_path):
    """The real ``lm_eval --model hf`` command: ``--metadata '{"conversation_cache": "on"}'``
    carries the conversations of drift_french_multiturn (a tiny random model with SmolLM2's
    tokenizer and template) and logs the samples of a run without it; a bad value is one
    line before any request."""
    model = tiny_chat_model(tmp_path / "model", smollm2_dir)
    logged = {}
    for mode in ("off", "on"):
        out = tmp_path / mode
        r = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={model}", "--tasks", "drift_french_multiturn",
                         "--limit", "3", "--gen_kwargs", "max_gen_toks=24", "--batch_size", "3", "--device", "cpu",
                         "--metadata", f'{{"conversation_cache": "{mode}"}}', "--output_path", str(out),
                         "--log_samples"])
        assert r.returncode == 0, r.stderr[-3000:]
        carried = re.findall(r"conversation cache: (\d+) of (\d+) prompt positions of 3 conversations", r.stderr)
        if mode == "on":  # most of each later prompt came from the carried states
            [(got, of)] = carried
            assert int(got) > int(of) // 3, r.stderr[-2000:]
        else:
            assert not carried
        assert "(its earlier prompt is not a prefix" not in r.stderr and "outgrew" not in r.stderr
        logged[mode] = samples_of(out, "drift_french_multiturn")  # prompts, answers, hashes, scores
    assert logged["on"] == logged["off"] and len(logged["on"]) == 3
    r = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={model}", "--tasks", "drift_french_multiturn",
                     "--limit", "1", "--metadata", '{"conversation_cache": "sometimes"}', "--device", "cpu"])
    assert r.returncode != 0 and "Traceback" not in r.stderr  # lm_eval's own exit status for a usage error
    assert last_line(r.stderr) == "error: unknown conversation_cache 'sometimes': use one of off, on, auto"
