import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # world, agent


def proxies():
    """The proxies under test: the Python one always; the CLI's ``interlock mcp-proxy``
    when INTERLOCK_CLI names the binary (CI sets it), else that parameter is skipped."""
    cli = os.environ.get("INTERLOCK_CLI")
    marks = [] if cli else [pytest.mark.skip(
        reason="INTERLOCK_CLI is unset: the CLI's `interlock mcp-proxy` is not run here (CI sets it)")]
    return [pytest.param("python", id="python-proxy"), pytest.param(cli or "cli", id="cli-proxy", marks=marks)]


@pytest.fixture(params=proxies())
def proxy(request):
    return request.param
