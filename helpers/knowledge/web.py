"""Web search for the agent, through LangChain's DuckDuckGo tool (off unless ``agent.web_search``)."""
from __future__ import annotations

import warnings


class WebSearchUnavailable(Exception):
    """Web search cannot be used here (package missing, or offline)."""


def web_search(query: str, max_chars: int = 1500) -> str:
    """One web search through LangChain's DuckDuckGo tool, or ``WebSearchUnavailable`` saying why not."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from langchain_community.tools import DuckDuckGoSearchRun
            tool = DuckDuckGoSearchRun()
    except Exception as exc:  # ImportError, or the tool's own check for its search package
        raise WebSearchUnavailable(f"web search is not available here ({type(exc).__name__}: {exc}); "
                                   "carrying on with the knowledge base only") from exc
    try:
        return str(tool.invoke(query))[:max_chars]
    except Exception as exc:  # offline, blocked or rate-limited: the tool raises many kinds
        raise WebSearchUnavailable(f"web search failed, probably offline ({type(exc).__name__}: {exc}); "
                                   "carrying on with the knowledge base only") from exc
