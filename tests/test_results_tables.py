"""The tables of the published runs in the README, docs/results/README.md and
docs/results/languages/README.md are written from the committed results by code
(``benchmarks/results_tables.py``): regenerated here, each must equal the committed
text, so that no published figure goes stale."""
import os
import sys

import pytest

from drift_eval.files import read_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import results_tables  # noqa: E402


@pytest.fixture(scope="module")
def cache():
    return {}


@pytest.mark.parametrize("rel", results_tables.FILES)
def test_each_committed_table_is_what_the_results_give(rel, cache):
    text = read_text(os.path.join(ROOT, rel), "Markdown file")
    names = [m.group("name") for m in results_tables.MARK.finditer(text)]
    assert names, f"{rel} holds no generated table"
    assert results_tables.regenerate(text, ROOT, cache) == text, (
        f"{rel}: a table differs from the committed results; run python benchmarks/results_tables.py --write")


def test_a_marked_table_of_no_known_name_is_one_clear_error():
    with pytest.raises(KeyError, match="no table named 'nonesuch'"):
        results_tables.regenerate("<!-- table: nonesuch -->\nold\n<!-- end table -->", ROOT, {})
