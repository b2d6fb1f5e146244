import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from frameworks import FRAMEWORKS  # noqa: E402
from launcher import leftovers  # noqa: E402


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Every test must leave no shared-memory object or socket of the library behind.

    The kernel tears sockets down shortly after their processes are reaped, so the check
    allows up to 3 s for names to disappear before it reports them.
    """
    before = leftovers()
    yield
    deadline = time.monotonic() + 3
    while (after := leftovers()) != before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert after == before, f"left behind: {sorted(set(after) - set(before))}"


@pytest.fixture(params=FRAMEWORKS)
def fw(request):
    """The framework a job runs under: every scenario runs once per framework."""
    return request.param
