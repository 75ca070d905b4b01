"""The start-up line (``lm_eval_drift.pth``) runs only the installed ``_startup.py``: a
``drift_eval`` module or package placed earlier on ``sys.path`` is never executed by the
programs that start on the machine."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from support.places import REPO

ROOT = str(REPO)
CHECK = ("import json, sys\n"
         "m = sys.modules.get('drift_eval._startup')\n"
         "print(json.dumps([getattr(m, '__file__', None), sum(type(f).__name__ == '_Finder' for f in sys.meta_path)]))")


@pytest.fixture(params=["module", "package"])
def planted(request, tmp_path):
    """A ``drift_eval`` on ``PYTHONPATH`` that leaves a marker file when it runs."""
    folder, marker = tmp_path / "planted", tmp_path / "RAN"
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    if request.param == "module":
        folder.mkdir()
        (folder / "drift_eval.py").write_text(code)
    else:
        (folder / "drift_eval").mkdir(parents=True)
        (folder / "drift_eval" / "__init__.py").write_text(code)
        (folder / "drift_eval" / "_startup.py").write_text(code)
    return folder, marker


def _python(args, planted_folder, **env):
    environ = dict(os.environ, PYTHONPATH=str(planted_folder), **env)
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=environ, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Error processing line" not in r.stderr, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_wheels_line_loads_the_file_beside_it(planted, tmp_path):
    """The line as the wheel ships it, processed by ``site`` from a site-packages folder
    that holds the package: the hook is that folder's file. ``site`` processes a
    virtual environment's site-packages twice: the hook is loaded once."""
    folder, marker = planted
    site_dir = tmp_path / "site-packages"
    (site_dir / "drift_eval").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "harness_ext", "_startup.py"), site_dir / "drift_eval" / "_startup.py")
    shutil.copy(os.path.join(ROOT, "harness_ext", "lm_eval_drift.pth"), site_dir / "lm_eval_drift.pth")
    code = f"import site; site.addsitedir({str(site_dir)!r}); site.addsitedir({str(site_dir)!r})\n" + CHECK
    path, finders = _python(["-S", "-c", code], folder)
    assert path == str(site_dir / "drift_eval" / "_startup.py") and finders == 1
    assert not marker.exists()
    off = _python(["-S", "-c", code], folder, LM_EVAL_DRIFT_AUTOLOAD="0")
    assert off == [str(site_dir / "drift_eval" / "_startup.py"), 0]  # loaded, but it installs nothing


def test_the_installed_line_ignores_a_drift_eval_earlier_on_the_path(planted):
    """This interpreter's installation (editable or not), started as any program starts."""
    folder, marker = planted
    path, finders = _python(["-c", CHECK], folder)
    assert path and os.path.isfile(path) and not path.startswith(str(folder)) and finders == 1
    assert os.path.basename(path) == "_startup.py" and not marker.exists()
