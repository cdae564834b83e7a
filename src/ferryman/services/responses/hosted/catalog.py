"""The hosted tools a server offers, built over the services that run them."""

from __future__ import annotations

from ferryman.api.responses import CodeInterpreterTool, FileSearchTool, HostedTool, McpTool, WebSearchTool
from ferryman.knowledge.rag import Searcher
from ferryman.knowledge.search import StoreRecords
from ferryman.tools.code_interpreter import CodeInterpreter
from ferryman.tools.mcp import McpClientPool
from ferryman.tools.websearch import WebSearch

from .base import HostedKind
from .code_interpreter import CodeInterpreterKind
from .file_search import FileSearchKind
from .mcp import McpKind
from .table import HostedTools
from .web_search import WebSearchKind


def hosted_tools(
    searcher: Searcher,
    stores: StoreRecords,
    mcp: McpClientPool | None = None,
    code_interpreter: CodeInterpreter | None = None,
    web_search: WebSearch | None = None,
) -> HostedTools:
    """The table of hosted tools; a kind whose service is not given is not offered.

    ``mcp`` comes last: its tools' names give way to the others' on a clash.

    Args:
        searcher: The search of vector stores (``file_search``).
        stores: The vector stores' records, as the caller may read them (``file_search``).
        mcp: The MCP client pool (``mcp``).
        code_interpreter: The code interpreter over the sandbox (``code_interpreter``).
        web_search: The web search (``web_search``, ``web_search_preview``).
    """
    kinds: dict[type[HostedTool], HostedKind] = {FileSearchTool: FileSearchKind(searcher, stores)}
    if code_interpreter is not None:
        kinds[CodeInterpreterTool] = CodeInterpreterKind(code_interpreter)
    if web_search is not None:
        kinds[WebSearchTool] = WebSearchKind(web_search)
    if mcp is not None:
        kinds[McpTool] = McpKind(mcp)
    return HostedTools(kinds)
