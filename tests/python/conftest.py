import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from launcher import leftovers  # noqa: E402


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Every test must leave no shared-memory object or socket of the library behind."""
    before = leftovers()
    yield
    after = leftovers()
    assert after == before, f"left behind: {sorted(set(after) - set(before))}"
