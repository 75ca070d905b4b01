"""The drift_languages family: one set of tasks per target language of the Language
Confusion Benchmark, generated from two templates, on a shared item bank; and its runs,
end to end, on hf-drift, hf and a real llama.cpp server."""
import glob
import json
import os
import subprocess
import sys

import pytest

from support.commands import LM_EVAL, results_of, run_drift_eval, run_lm_eval, samples_of

from drift_eval import catalogue, tasks
from drift_eval.errors import DriftUsageError
from drift_eval.metrics.languages import TARGETS
from drift_eval.taskdata import languages as data
from drift_eval.tasks.drift_languages import utils

FOLDER = os.path.join(tasks.task_folder(), "drift_languages")
NAMES = [f"drift_{c}{s}" for c in TARGETS for s in ("", "_single", "_single_native", "_multiturn")]


def test_the_task_files_are_exactly_what_the_generator_writes():
    r = subprocess.run([sys.executable, "-m", "drift_eval.tasks.drift_languages._generate_configs", "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    made = {os.path.basename(p) for p in glob.glob(os.path.join(FOLDER, "*.yaml"))}
    assert made == {f"{n}.yaml" for n in NAMES} | {"drift_languages.yaml"}


def test_every_language_has_its_tasks_and_groups_and_neutral_metric_names():
    cat = tasks.metric_catalogue()
    info = tasks.task_info()
    for code in TARGETS:
        single, multi = cat[f"drift_{code}_single"], cat[f"drift_{code}_multiturn"]
        assert catalogue.headline(cat, f"drift_{code}_single") == "fully_target"
        assert catalogue.headline(cat, f"drift_{code}_multiturn") == "last3_target"
        assert not [m for m in [*single, *multi] if "french" in m]
        assert set(cat["drift_french_single"]) == {m.replace("target", "french") for m in single}
        assert info[f"drift_{code}_single"]["dataset_kwargs"] == {"target_language": code, "prompt_wording": "en"}
        assert info[f"drift_{code}_single_native"]["dataset_kwargs"]["prompt_wording"] == "native"
        assert cat[f"drift_{code}"]["drift_score"]["higher_is_better"] is True
    assert list(cat["drift_languages"]) == ["drift_score"]


def test_the_bank_is_large_shared_and_varied():
    requests, convs = data.read_requests(), data.read_conversations()
    assert len(requests) >= 200 and len(convs) >= 100
    assert len({r["id"] for r in requests}) == len(requests) and len({c["id"] for c in convs}) == len(convs)
    assert {"list", "code", "names", "table"} <= {r["kind"] for r in requests}
    assert len({r["topic"] for r in requests}) >= 20 and len({c["topic"] for c in convs}) >= 20
    assert all(len(c["user_turns"]) == 8 for c in convs)
    assert len({r["request"] for r in requests}) == len(requests)


def test_every_instruction_names_its_language_and_has_a_native_wording():
    prompts = data.native_prompts()
    for code in TARGETS:
        assert data.system_prompt(code).startswith("You are a helpful assistant. Answer only in ")
        assert isinstance(prompts[code]["checked"], bool) and prompts[code]["prompt"]
        assert data.system_prompt(code, "native") == prompts[code]["prompt"]
    assert "Japanese" in data.system_prompt("ja") and "日本語" in data.system_prompt("ja", "native")
    assert data.system_prompt("fr", "native") == (
        "Tu es un assistant serviable. Réponds uniquement en français, quelle que soit la langue de "
        "l'utilisateur. Ne change jamais de langue.")


def test_loaders_take_the_first_k_of_the_bank_and_refuse_bad_options_in_one_line():
    docs = utils.load_single_turn("hi", num_requests=5)["test"]
    assert len(docs) == 5 and docs[0]["id"] == data.read_requests()[0]["id"] and docs[0]["target_language"] == "hi"
    assert "Hindi" in docs[0]["system_prompt"]
    convs = utils.load_conversations("ar", num_conversations="3")["test"]
    assert len(convs) == 3 and json.loads(convs[0]["spec"])["user_turns"] == data.read_conversations()[0]["user_turns"]
    for call, needle in ((lambda: utils.load_single_turn("xx"), "target_language must be one of fr, de"),
                         (lambda: utils.load_single_turn("ja", "klingon"), "prompt_wording must be one of en, native"),
                         (lambda: utils.load_single_turn("ja", num_requests=0), "num_requests must be a whole number"),
                         (lambda: utils.load_conversations("ja", num_conversations=101), "between 1 and 100")):
        with pytest.raises(DriftUsageError, match=needle):
            call()


def test_the_survival_aggregation_is_bound_to_the_task_language():
    timelines = [["ja", "ja", "en"], ["ja", "ja", "ja"]]
    assert list(utils.target_survival(timelines, target="ja")) == [1.0, 1.0, 0.5]
    assert list(utils.target_survival(timelines, target="fr")) == [0.0, 0.0, 0.0]


@pytest.mark.slow
@pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")
def test_lm_eval_lists_every_language_task_and_group():
    r = run_lm_eval(["ls", "tasks"])
    assert r.returncode == 0
    listed = {line.split("|")[1].strip() for line in r.stdout.splitlines() if line.count("|") >= 2}
    assert set(NAMES) | {"drift_languages"} <= listed, sorted(set(NAMES) - listed)


def _check_languages_run(out, tasks_run=TARGETS):
    res = results_of(out)
    results = res["results"]
    assert 0.0 <= results["drift_languages"]["drift_score,none"] <= 1.0
    assert results["drift_languages"]["sample_len"] == 4 * len(tasks_run)  # 2 answers + 2 conversations each
    for code in tasks_run:
        assert 0.0 <= results[f"drift_{code}"]["drift_score,none"] <= 1.0
        assert res["configs"][f"drift_{code}_single"]["metadata"]["target_language"] == code
        [s1, s2] = samples_of(out, f"drift_{code}_single")
        assert "fully_target" in s1 and "fully_french" not in s1
        conv = samples_of(out, f"drift_{code}_multiturn")
        assert len(conv) == 2 and [m["role"] for m in json.loads(conv[0]["resps"][0][0])].count("assistant") == 8
    assert "Japanese" in samples_of(out, "drift_ja_single")[0]["doc"]["system_prompt"]


@pytest.fixture(scope="module")
def hf_runs(tiny_model_dir, tmp_path_factory):
    """``lm_eval --tasks drift_languages --limit 2`` on hf-drift and on lm-eval's hf, with a
    two-layer random-init model (4 tokens an answer): {backend: output folder}."""
    if LM_EVAL is None:
        pytest.skip("the lm_eval console script is not installed")
    out = {}
    for model in ("hf-drift", "hf"):
        folder = tmp_path_factory.mktemp(f"languages_{model}")
        r = run_lm_eval(["--model", model, "--model_args", f"pretrained={tiny_model_dir}", "--tasks",
                         "drift_languages", "--apply_chat_template", "--limit", "2", "--gen_kwargs", "max_gen_toks=4",
                         "--batch_size", "8", "--device", "cpu", "--output_path", folder, "--log_samples"])
        assert r.returncode == 0, r.stderr[-3000:]
        out[model] = folder
    return out


@pytest.mark.parametrize("model", ["hf-drift", "hf"])
@pytest.mark.slow
def test_drift_languages_runs_on_hf_and_hf_drift(model, hf_runs):
    _check_languages_run(hf_runs[model])


@pytest.mark.slow
def test_report_leaderboard_and_compare_read_every_language_and_the_pool(hf_runs, tmp_path):
    md = tmp_path / "report.md"
    r = run_drift_eval(["report", hf_runs["hf-drift"], "-o", md])
    assert r.returncode == 0, r.stderr[-2000:]
    text = md.read_text(encoding="utf-8")
    assert "## Languages" in text and "| `Japanese` (`ja`) | `drift_ja`: " in text and "| `drift_ja_single`: " in text
    assert "| all 14 languages, pooled | fully in the target language |" in text  # the family pooled per headline
    # the time in the language, each answer's share (each conversation's share of turns), with its exact interval
    assert "| language | time in the language |" in text
    assert "| `Japanese` (`ja`) | `drift_ja_single`: time in the target language (share of the answer) |" in text
    assert "`drift_ja_multiturn`: time in the target language (share of the turns) |" in text
    assert "drift_ja_single: share of answers still in Japanese, by segment" in text
    assert "drift_ja_single: segment languages" not in text or "left Japanese" in text
    head = text.split("## Headline", 1)[1].split("## ", 1)[0]
    assert "drift\\_languages: drift\\_score" in head and "drift\\_ja" not in head  # members: on the Languages page
    board = tmp_path / "board.csv"
    r = run_drift_eval(["leaderboard", hf_runs["hf-drift"], "-o", board])
    assert r.returncode == 0, r.stderr[-2000:]
    header = board.read_text(encoding="utf-8").splitlines()[0].split(",")
    first = [h for h in header if h.endswith(":value")]
    assert first[0] == "drift_languages/drift_score:value" and "drift_ja/drift_score:value" in first
    assert not [h for h in first if h.startswith("drift_ja_single/")]
    r = run_drift_eval(["compare", hf_runs["hf-drift"], hf_runs["hf"], "--format", "json"])
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    rows = {(c["task"], c["metric"]) for c in json.loads(r.stdout)}
    assert ("drift_languages", "drift_score") in rows and ("drift_ja", "drift_score") in rows


@pytest.mark.slow
@pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")
def test_drift_languages_runs_on_a_llama_cpp_server(llama_server, tmp_path):
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "local-chat-completions",
                     "--model_args",
                     f"model={llama_server.alias},base_url={llama_server.url},num_concurrent=1,max_retries=1",
                     "--tasks", "drift_languages", "--apply_chat_template", "--limit", "2",
                     "--gen_kwargs", "max_gen_toks=4", "--output_path", out, "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:] + llama_server.tail()
    _check_languages_run(out)
    assert samples_of(out, "drift_zh_single")[0]["answer_tokens"] == 4.0   # forced on the server too
