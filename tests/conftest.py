"""Shared test setup: every test starts in English, whatever the developer's environment."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _english_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # `SHAPECHECK_LANG=zh` in a developer's shell would otherwise change every message the
    # tests compare; tests of the language choice set it themselves (tests/test_i18n.py).
    monkeypatch.delenv("SHAPECHECK_LANG", raising=False)
