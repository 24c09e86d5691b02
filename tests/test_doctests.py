"""The examples in the public docstrings run and give what they show (hand-worked values:
scores of short lists, judgments read from a few lines)."""
import doctest
import importlib

import pytest

MODULES = ["satcal.measures.bins", "satcal.measures.gains", "satcal.measures.discounts",
           "satcal.measures.list_measures", "satcal.measures.registry", "satcal.measures.scoring",
           "satcal.judgments"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no example to run"
    assert result.failed == 0
