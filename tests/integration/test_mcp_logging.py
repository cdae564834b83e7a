"""The HTTP and MCP libraries log URLs and session ids below WARNING; ``ferryman serve`` keeps them quiet."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from ferryman.logs import QUIET_LOGGERS, configure_logging
from ferryman.tools.mcp import McpClientPool, McpEndpoint, McpSettings
from mcp_servers import LOCAL_FETCH, RunningServer

pytestmark = pytest.mark.anyio

SECRET = "url-token-5e1d"


@pytest.fixture()
def quiet_levels() -> Iterator[None]:
    """Put the libraries' logger levels back as they were."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


async def _call(url: str) -> None:
    pool = McpClientPool(LOCAL_FETCH, McpSettings())
    try:
        result = await pool.call_tool(McpEndpoint(url, "streamable_http"), "add", {"a": 1, "b": 2})
    finally:
        await pool.close()
    assert result.error_message is None


@pytest.mark.usefixtures("quiet_levels")
async def test_a_secret_in_an_mcp_url_never_reaches_the_log(
    mcp_http_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"{mcp_http_server.url}?token={SECRET}"
    caplog.set_level(logging.DEBUG)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    await _call(url)
    assert SECRET in caplog.text  # left alone, the libraries do log it

    caplog.clear()
    configure_logging("debug")
    await _call(url)
    assert caplog.records  # ferryman's own records still come through at DEBUG
    assert SECRET not in caplog.text
