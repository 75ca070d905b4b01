"""``drift-eval``'s argument handling: every command's module, the validated option types, the
shared helpers (scene selection, model folder, compensation install), help that imports no
torch, bad numbers that stop with one line before any model loads, and Ctrl-C."""
import argparse
import json
import os
import re
import subprocess
import sys

import pytest

import drift_eval.cli as cli
from drift_eval.cli import main
from drift_eval.cli.shared import bundled_scenes, model_dir, positive, whole
from drift_eval.errors import DriftUsageError
from drift_eval.plugin import local_models, sweep
from drift_eval.reports import render
from drift_eval.taskdata.alpha import read_scenes
from support.checks import one_line_error

HEAVY = ("torch", "transformers", "lm_eval")


# ---------------------------------------------------------------------- the commands
def test_every_command_has_its_module_and_the_docstring_lists_them_all():
    names = [c.NAME for c in cli.COMMANDS]
    assert len(names) == len(set(names)) == 11
    for command in cli.COMMANDS:
        assert command.__name__ == f"drift_eval.cli.{command.NAME.replace('-', '_')}"
        assert callable(command.add_arguments) and callable(command.run) and command.HELP
    listed = re.findall(r"^ {4}drift-eval (\S+)", cli.__doc__, flags=re.M)
    assert sorted(listed) == sorted(names)
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == names  # the order --help lists them in
    for name in names:
        assert sub.choices[name].prog == f"drift-eval {name}"


# Every numeric option of ``decode`` (the ones that were plain int/float) with a bad value:
# one line naming the option, exit 2.
BAD_NUMBERS = [
    (["decode", "--samples", "x"], "argument --samples: must be a whole number >= 1, got 'x'"),
    (["decode", "--samples", "0"], "argument --samples: must be a whole number >= 1, got 0"),
    (["decode", "--samples", "2.5"], "argument --samples: must be a whole number >= 1, got '2.5'"),
    (["decode", "--length", "0"], "argument --length: must be a whole number >= 1, got 0"),
    (["decode", "--length", "1.5"], "argument --length: must be a whole number >= 1, got '1.5'"),
    (["decode", "--folds", "1"], "argument --folds: must be a whole number >= 2, got 1"),
    (["decode", "--folds", "many"], "argument --folds: must be a whole number >= 2, got 'many'"),
    (["decode", "--text-window", "-1"], "argument --text-window: must be a whole number >= 0, got -1"),
    (["decode", "--text-window", "x"], "argument --text-window: must be a whole number >= 0, got 'x'"),
    (["decode", "--temperature", "0"], "argument --temperature: must be a number > 0, got '0'"),
    (["decode", "--temperature", "-1"], "argument --temperature: must be a number > 0, got '-1'"),
    (["decode", "--temperature", "nan"], "argument --temperature: must be a number > 0, got 'nan'"),
    (["decode", "--temperature", "inf"], "argument --temperature: must be a number > 0, got 'inf'"),
    (["decode", "--temperature", "hot"], "argument --temperature: must be a number > 0, got 'hot'"),
    (["decode", "--seed", "-1"], "argument --seed: must be a whole number >= 0, got -1"),
    (["decode", "--threads", "x"], "argument --threads: must be a whole number >= 0, got 'x'"),
    (["alpha", "--threads", "-2"], "argument --threads: must be a whole number >= 0, got -2"),
    (["alpha", "--scenes", "0"], "argument --scenes: must be a whole number >= 1, got 0"),
    (["accessibility", "--eps", "0"], "argument --eps: must be a number > 0, got '0'"),
    # digits of other scripts, superscripts and underscores: ASCII digits only (no traceback)
    (["sweep", "--output", "out", "--limit", "\u0663"], "argument --limit: must be a number > 0, got '\u0663'"),
    (["accessibility", "--strings", "\u00b2"], "argument --strings: must be a whole number >= 1, got '\u00b2'"),
    (["alpha", "--batch-size", "1_000"], "argument --batch-size: must be a whole number >= 1, got '1_000'"),
]


def test_a_setting_strength_in_other_digits_is_one_line_before_any_output(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = main(["sweep", "--output", "out", "--settings", "log:\uff11"])
    one_line_error(rc, capsys.readouterr().err, "strength must be a number >= 0, got '\uff11'")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args, needle", BAD_NUMBERS)
def test_a_bad_number_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    rc = main(args)
    cap = capsys.readouterr()
    one_line_error(rc, cap.err, needle)
    assert cap.out == "" and os.listdir(tmp_path) == []


def test_help_and_bad_numbers_import_no_torch():
    """In a fresh interpreter: every command's --help, and every bad number above, finish
    without torch, transformers or lm-eval ever imported (so no model can have loaded)."""
    code = ("import contextlib, io, json, sys\n"
            "from drift_eval.cli import main\n"
            "out = []\n"
            "for args in json.loads(sys.argv[1]):\n"
            "    err = io.StringIO()\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):\n"
            "        try:\n"
            "            rc = main(args)\n"
            "        except SystemExit as exc:\n"
            "            rc = exc.code\n"
            "    out.append([args, rc, err.getvalue()])\n"
            f"print(json.dumps([out, [m for m in {HEAVY!r} if m in sys.modules]]))")
    runs = [["--help"]] + [[c.NAME, "--help"] for c in cli.COMMANDS] + [args for args, _ in BAD_NUMBERS]
    env = dict(os.environ, LM_EVAL_DRIFT_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(runs)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    results, heavy = json.loads(r.stdout.strip().splitlines()[-1])
    assert heavy == []
    for (args, rc, err), expected in zip(results, [0] * (1 + len(cli.COMMANDS)) + [2] * len(BAD_NUMBERS)):
        assert rc == expected, (args, err)


# ---------------------------------------------------------------------- the option types
@pytest.mark.parametrize("text, value", [("0", 0), ("7", 7), ("+3", 3), (" 12 ", 12)])
def test_whole_accepts_whole_numbers_in_range(text, value):
    assert whole(0, 12)(text) == value


@pytest.mark.parametrize("text, message", [
    ("-1", "must be a whole number between 0 and 12, got -1"),
    ("13", "must be a whole number between 0 and 12, got 13"),
    ("1.0", "must be a whole number between 0 and 12, got '1.0'"),
    ("True", "must be a whole number between 0 and 12, got 'True'"),
    ("", "must be a whole number between 0 and 12, got ''"),
    ("\u0663", "must be a whole number between 0 and 12, got '\u0663'"),
    ("\u00b2", "must be a whole number between 0 and 12, got '\u00b2'"),
    ("1_0", "must be a whole number between 0 and 12, got '1_0'"),
])
def test_whole_rejects_anything_else_in_one_line(text, message):
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        whole(0, 12)(text)
    assert str(exc.value) == message


@pytest.mark.parametrize("text, value", [("1", 1.0), ("0.25", 0.25), ("1e-3", 0.001), ("2048", 2048.0)])
def test_positive_accepts_finite_numbers_above_zero(text, value):
    assert positive(text) == value


@pytest.mark.parametrize("text", ["0", "-0.5", "nan", "inf", "-inf", "x", "", "\u0663", "1_000", "\uff11.5"])
def test_positive_rejects_anything_else_in_one_line(text):
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        positive(text)
    assert str(exc.value) == f"must be a number > 0, got {text!r}"


# ---------------------------------------------------------------------- the shared helpers
def test_bundled_scenes_takes_the_first_scenes_and_the_named_axes():
    scenes, axes = bundled_scenes(argparse.Namespace(scenes=3, axes=" genre, detail,,"))
    assert axes == ["genre", "detail"]
    assert scenes == read_scenes()[:3] and all(s["genre"] and s["detail"] for s in scenes)
    assert len(bundled_scenes(argparse.Namespace(scenes=len(read_scenes()), axes="detail"))[0]) == len(read_scenes())


@pytest.mark.parametrize("scenes, axes, needle", [
    (0, "detail", "--scenes must be between 1 and 20"),
    (21, "detail", "--scenes must be between 1 and 20"),
    (2, "colour", "--axes takes names from detail, paraphrase, genre, translation"),
    (2, "detail,colour", "--axes takes names from"),
    (2, " , ", "--axes takes names from"),
])
def test_bundled_scenes_rejects_what_the_set_does_not_hold(scenes, axes, needle):
    with pytest.raises(DriftUsageError) as exc:
        bundled_scenes(argparse.Namespace(scenes=scenes, axes=axes))
    assert needle in exc.value.message


def test_model_dir_is_the_folder_given_its_gguf_conversion_or_the_bundled_model(monkeypatch, tmp_path):
    monkeypatch.setattr(local_models, "smollm2_dir", lambda: "/bundled")
    monkeypatch.setattr(local_models, "cached_from_gguf", lambda folder, name: f"/converted/{folder}/{name}")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert model_dir(argparse.Namespace(model=None, gguf_file=None)) == "/bundled"
    assert model_dir(argparse.Namespace(model=str(folder), gguf_file=None)) == str(folder)
    assert model_dir(argparse.Namespace(model=str(folder), gguf_file="q8.gguf")) == f"/converted/{folder}/q8.gguf"
    assert model_dir(argparse.Namespace(model="org/name", gguf_file=None)) == "org/name"  # a hub name


@pytest.mark.parametrize("command, args", [
    ("alpha", ["--n-continuations", "2", "--octaves", "3", "--bootstrap-iters", "0"]),
    ("decode", ["--samples", "4", "--folds", "2", "--length", "16", "--batch-size", "4"]),
])
def test_bad_input_found_at_run_time_stops_before_the_model_loads(capsys, monkeypatch, command, args):
    """Checks that need the scene set (``--scenes`` beyond it, unknown ``--axes``) or a
    setting (``--compensation``) still come before the model: loading it would fail here."""
    def no_model(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(local_models, "smollm2_dir", no_model)  # what every load without --model starts from
    for bad, needle in ((["--scenes", "21"], "--scenes must be between 1 and 20"),
                        (["--axes", "colour"], "--axes takes names from"),
                        (["--compensation", "loud"], "unknown compensation 'loud'")):
        rc = main([command, *args, *bad])
        one_line_error(rc, capsys.readouterr().err, needle)


# ---------------------------------------------------------------------- Ctrl-C
def test_an_interrupt_exits_130_and_the_sweep_says_how_to_resume(capsys, tmp_path, monkeypatch):
    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_sweep", interrupt)
    monkeypatch.setattr(render, "write_report", interrupt)
    assert main(["sweep", "--output", str(tmp_path / "out"), "--settings", "none"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"drift-eval: interrupted: {sweep.RESUME}"
    assert main(["report", str(tmp_path)]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "drift-eval: interrupted"


# ---------------------------------------------------------------------- head calibration, once for both
@pytest.mark.slow
@pytest.mark.parametrize("command, args", [
    ("alpha", ["--scenes", "1", "--axes", "detail", "--n-continuations", "2", "--octaves", "3",
               "--bootstrap-iters", "0", "--json"]),
    ("decode", ["--scenes", "1", "--axes", "detail", "--samples", "4", "--folds", "2", "--length", "16",
                "--batch-size", "4", "--json"]),
])
def test_head_compensation_is_calibrated_for_the_model_measured(tiny_model_dir, tmp_path, monkeypatch, capsys,
                                                                 command, args):
    monkeypatch.setenv("DRIFT_CACHE_DIR", str(tmp_path / "cache"))
    assert main([command, "--model", str(tiny_model_dir), "--threads", "1", "--compensation", "head:1", *args]) == 0
    cap = capsys.readouterr()
    assert "head:1" in cap.err
    json.loads(cap.out)
    folder = tmp_path / "cache" / "head_calibration"
    [calibration] = [name for name in os.listdir(folder) if name.endswith(".json")]
    gamma = json.loads((folder / calibration).read_text())["gamma"]  # measured on this model, then cached
    assert len(gamma) == 2 and all(len(row) == 4 for row in gamma)  # (layers, heads) of the tiny model
