"""Web search for the agent through a SearXNG instance's JSON API (``agent.web_search_url``; off when
empty): the metasearch engine that local research assistants run beside their model.  Standard
library only; a search that cannot be made says why and the agent goes on with the knowledge base."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request


class WebSearchUnavailable(Exception):
    """Web search cannot be used here (no server at the URL, offline, or not a SearXNG JSON reply)."""


def web_search(query: str, base_url: str, max_results: int = 3, max_chars: int = 1500,
               timeout: float = 10.0) -> str:
    """The first ``max_results`` results of a SearXNG search (title, URL and snippet, one line each),
    at most ``max_chars`` characters, or ``WebSearchUnavailable`` saying what to do."""
    url = f"{base_url.rstrip('/')}/search?{urllib.parse.urlencode({'q': query, 'format': 'json'})}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            reply = json.loads(response.read().decode("utf-8"))
        results = reply["results"]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # unreachable, HTTP error, not SearXNG JSON
        raise WebSearchUnavailable(
            f"web search through {base_url} failed ({type(exc).__name__}: {exc}); check that SearXNG runs there "
            "with the json format enabled (search: formats: [html, json] in its settings.yml); carrying on with "
            "the knowledge base only") from exc
    lines = [f"{r.get('title', '').strip()} ({r.get('url', '')}): {' '.join(str(r.get('content', '')).split())}"
             for r in results[:max_results] if isinstance(r, dict)]
    return "\n".join(lines)[:max_chars]
