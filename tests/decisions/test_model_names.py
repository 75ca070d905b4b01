"""Machine-independent names: a run's model gets one readable name wherever it ran, two
different models with one readable name are told apart by a short stable tag, and a sweep
publishes under the readable name (and resumes a folder written the old way)."""
import glob
import json
import os
import shutil

import pytest

from support.handmade_results import write_output

from drift_eval.decide.results import load_output
from drift_eval.errors import DriftUsageError
from drift_eval.plugin import local_models
from drift_eval.plugin.sweep import run_sweep
from drift_eval.plugin.sweep_folder import model_folder, publish as _publish
from drift_eval.resultfiles.names import converted_gguf, model_name
from drift_eval.resultfiles.runfile import read_run_file

SMOL = "SmolLM2-135M-Instruct.Q4_1"


@pytest.mark.parametrize("model_args, name", [
    ({"pretrained": f"/root/.cache/lm-eval-drift/gguf/{SMOL}-0932cb8f3d829473"}, SMOL),
    ({"pretrained": f"$DRIFT_CACHE_DIR/gguf/{SMOL}-be7135aa9fde2aae"}, SMOL),
    ({"pretrained": f"C:\\Users\\ana\\.cache\\lm-eval-drift\\gguf\\{SMOL}-be7135aa9fde2aae"}, SMOL),
    ({"pretrained": "$MODELS/smollm2_random_init"}, "smollm2_random_init"),
    ({"pretrained": "$MODELS/qwen2.5-coder-0.5b-instruct", "gguf_file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"},
     "qwen2.5-coder-0.5b-instruct-q4_k_m"),
    ({"pretrained": "~/models/llama/"}, "llama"),
    ({"pretrained": "Qwen/Qwen2.5-0.5B-Instruct"}, "Qwen/Qwen2.5-0.5B-Instruct"),
    ({"pretrained": "org/gguf/not-a-cache-0123456789abcdef"}, "org/gguf/not-a-cache-0123456789abcdef"),  # a hub name
])
def test_the_readable_name_is_the_same_on_every_machine(model_args, name):
    assert model_name(model_args, {"config": {}}) == name


def test_a_converted_folder_is_recognised_by_its_content_key():
    assert converted_gguf(f"/home/ana/.cache/lm-eval-drift/gguf/{SMOL}-be7135aa9fde2aae/") == (SMOL, "be7135aa9fde2aae")
    assert converted_gguf(f"/models/{SMOL}-be7135aa9fde2aae") is None  # not in a gguf/ cache folder
    assert converted_gguf(f"/root/.cache/lm-eval-drift/gguf/{SMOL}") is None  # no key


def _run(root, setting, pretrained, **extra):
    """One hand-made run of ``setting`` whose model_args name ``pretrained``."""
    write_output(root, settings=(setting,))
    [path] = glob.glob(str(root / setting.replace(":", "_") / "*" / "results_*.json"))
    doc = json.load(open(path, encoding="utf-8"))
    doc["config"]["model_args"] = {**doc["config"]["model_args"], "pretrained": pretrained, **extra}
    json.dump(doc, open(path, "w", encoding="utf-8"))
    return root


def test_one_model_file_gets_one_name_across_machines_and_relabelled_files(tmp_path):
    """The same GGUF file converted on two machines, and written in its portable form: one
    model, so ``log:0.25`` pairs with ``none`` whatever machine each ran on."""
    key = "be7135aa9fde2aae"
    _run(tmp_path / "a", "none", f"/root/.cache/lm-eval-drift/gguf/{SMOL}-{key}")
    _run(tmp_path / "b", "log:0.25", f"$DRIFT_CACHE_DIR/gguf/{SMOL}-{key}")
    _run(tmp_path / "c", "const:0.25", f"/home/ana/.cache/lm-eval-drift/gguf/{SMOL}-{key}/")
    out = load_output(tmp_path / "a", tmp_path / "b", tmp_path / "c")
    assert out.models == [SMOL]
    assert out.compare("drift_french_single", "fully_french", "log:0.25").difference == pytest.approx(0.5)


def test_two_models_with_one_name_are_told_apart_by_a_short_tag(tmp_path):
    """Two different GGUF files with one name (two content keys), and two local folders
    with one name: each gets ``<name>@<8 characters>``, never a path, and the same tag at
    every load."""
    _run(tmp_path / "a", "none", f"/root/.cache/lm-eval-drift/gguf/{SMOL}-0932cb8f3d829473")
    _run(tmp_path / "b", "none", f"$DRIFT_CACHE_DIR/gguf/{SMOL}-be7135aa9fde2aae")
    _run(tmp_path / "c", "none", "/runs/a/checkpoint-1000")
    _run(tmp_path / "d", "none", "/runs/b/checkpoint-1000")
    names = load_output(*(tmp_path / x for x in "abcd")).models
    assert names[:2] == [f"{SMOL}@0932cb8f", f"{SMOL}@be7135aa"]
    assert [n.split("@")[0] for n in names[2:]] == ["checkpoint-1000"] * 2 and names[2] != names[3]
    assert all("/" not in n and len(n.split("@")[1]) == 8 for n in names)
    assert sorted(load_output(*(tmp_path / x for x in "dcba")).models) == sorted(names)  # stable


# ------------------------------------------------------------------------ the sweep's folders
@pytest.mark.parametrize("model_args, folder", [
    ({"pretrained": f"/root/.cache/lm-eval-drift/gguf/{SMOL}-be7135aa9fde2aae"}, SMOL),
    ({"pretrained": "/models/dir", "gguf_file": "Qwen2.5-0.5B-Instruct-Q8_0.gguf"}, "Qwen2.5-0.5B-Instruct-Q8_0"),
    ({"pretrained": "Qwen/Qwen2.5-0.5B-Instruct"}, "Qwen__Qwen2.5-0.5B-Instruct"),  # as lm-eval names it
    ({"pretrained": "/data/.hidden"}, "hidden"),  # a hidden folder would not be read
])
def test_a_setting_is_published_under_the_readable_name(model_args, folder):
    assert model_folder(model_args, {"config": {}}) == folder


def test_publish_moves_lm_evals_files_into_the_readable_folder(tmp_path):
    staging = tmp_path / "staged"
    write_output(staging, settings=("none",))  # lm-eval's layout: <sanitised pretrained>/results_*.json
    setting = tmp_path / "out" / "none"
    published = _publish(str(staging / "none"), str(setting))
    assert os.path.dirname(published) == str(setting / "tiny")
    rf = read_run_file(published)
    assert sorted(os.listdir(setting / "tiny")) == sorted(os.path.basename(f) for f in [*rf.sample_files, published])
    assert len(rf.sample_files) == 6 and not (staging / "none").exists()


def _old_sweep(root, cache, key="0932cb8f3d829473"):
    """A sweep of the bundled model finished by an earlier version: model folders named
    after lm-eval's sanitised path, the converted folder keyed by path, size and mtime."""
    earlier = cache / "gguf" / f"{SMOL}-{key}"
    earlier.mkdir(parents=True)
    (earlier / "config.json").write_text("{}")
    write_output(root, settings=("none", "log:0.25"))
    for setting in ("none", "log_0.25"):
        os.rename(root / setting / "__models__tiny", root / setting / f"__root__.cache__lm-eval-drift__gguf__{SMOL}-{key}")
    options = {"tasks": ["drift_french_single"], "model_args": {"pretrained": str(earlier)}, "limit": None,
               "gen_kwargs": "", "apply_chat_template": True, "metadata": {}, "span": "system"}
    (root / "sweep.json").write_text(json.dumps({"settings": ["none", "log:0.25"], "tasks": options["tasks"],
                                                 "options": options}, indent=2))
    return earlier


def test_a_sweep_finished_the_old_way_resumes_without_running(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _old_sweep(out, tmp_path / "cache")
    manifest = (out / "sweep.json").read_text()
    monkeypatch.setattr(local_models, "smollm2_dir", lambda: pytest.fail("the sweep's own model is known"))
    lines = []
    status = run_sweep(str(out), "none,log:0.25", "drift_french_single", log=lines.append)
    assert status == {"none": "skipped", "log:0.25": "skipped"}
    assert "[2/2] log:0.25: results present, skipped" in lines and lines[-1].startswith("sweep complete")
    assert (out / "sweep.json").read_text() == manifest


def test_a_sweep_whose_converted_model_is_gone_is_refused_with_one_line(tmp_path, monkeypatch):
    out = tmp_path / "out"
    earlier = _old_sweep(out, tmp_path / "cache")
    shutil.rmtree(earlier)
    monkeypatch.setattr(local_models, "smollm2_dir", lambda: str(tmp_path / "cache" / "gguf" / f"{SMOL}-be7135aa9fde2aae"))
    with pytest.raises(DriftUsageError) as exc:
        run_sweep(str(out), "none,log:0.25", "drift_french_single", log=lambda line: None)
    assert exc.value.message == (f"{out} holds a sweep of the bundled model converted at {earlier}, which is gone: "
                                 f"finish it where that folder is, or use another --output")
