"""`fixture_trace`: one shared fixture trace per test run (see shared_traces.py)."""

from __future__ import annotations

import pytest

from shared_traces import FixtureTrace


@pytest.fixture(scope="session")
def fixture_trace(request) -> FixtureTrace:
    """The trace a test is parametrised with (`@every_trace(...)`, `@first_trace(...)`); the session
    keeps it until a test needs another."""
    return FixtureTrace(request.param)
