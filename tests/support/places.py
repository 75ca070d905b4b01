"""Where the checkout's folders are, for tests that read committed files."""
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
BENCHMARKS = REPO / "benchmarks"
