from __future__ import annotations

import pytest

from tests.deploy import tools


@pytest.fixture(scope="session")
def compose_bin() -> str:
    return tools.compose_binary()
