"""A run told as a log a reader can follow, one line per step, like the seed write-up's: the
sub-queries, each route, the passages each search found, what the judge kept, the gap queries of
each round, the chain's plan and reads, then the report's steps.  The demo and the notebooks
print each line as its step ends (``helpers.lab.display.stream_steps``)."""
from __future__ import annotations

from helpers.results import TraceStep


def step_log(t: TraceStep) -> str | None:
    """What one step did, in one line; None for a step a reader need not follow (a search inside
    a chain step, say)."""
    where = f"[round {t.iteration}] " if t.iteration else ""
    if t.step == "decompose":
        return f"sub-queries: {t.parsed}"
    if t.step == "route":
        routes = ", ".join(f"{r['collection']} ({r['query']!r})" for r in t.parsed or []) or "no collection"
        return f"{where}route {t.inputs.get('subquery')!r} -> {routes}"
    if t.step == "retrieve":
        titles = list(dict.fromkeys(h["title"] for h in t.kept))
        return (f"{where}found {len(t.kept)} passage(s): {'; '.join(titles[:4])}"
                + (f" and {len(titles) - 4} more" if len(titles) > 4 else ""))
    if t.step == "relevance":
        return f"{where}judged: kept {len(t.kept)}, set aside {len(t.dropped)}"
    if t.step == "reflect":
        return f"{where}gap queries: {t.parsed}" if t.parsed else f"{where}no gap found: the search stops"
    if t.step == "timeline":
        shown = t.parsed[:: max(1, len(t.parsed) // 8)][:8] if t.parsed else []
        return "timeline: " + "; ".join(t.notes) + "".join(f"\n      {line}" for line in shown)
    if t.step == "story plan" and isinstance(t.parsed, dict):
        return f"outline: title {t.parsed['title']!r}; themes in turn: {' | '.join(t.parsed['headings'])}"
    if t.step == "plan" and isinstance(t.parsed, dict):
        return f"plan: {t.parsed.get('steps')}"
    if t.step in ("read", "family"):
        how = " (read off the family written down)" if t.step == "family" else ""
        return f"step {t.iteration}: {t.inputs.get('query')!r} -> {t.parsed!r}{how}"
    if t.step == "section":
        parsed = t.parsed or {}
        return (f"section {parsed.get('heading', t.inputs.get('topic'))!r}: "
                f"{len(parsed.get('points', []))} point(s) kept")
    if t.step in ("overview", "conclusion", "synthesize"):
        return f"{t.step}: written ({t.completion_tokens} tokens)"
    if t.step == "answer" and t.parsed:
        return f"answer: {t.parsed if isinstance(t.parsed, str) else t.parsed.get('answer')!r}"
    if t.step in ("budget", "outline"):
        return f"{where}{t.step}: {'; '.join(t.notes)}"
    return None


def run_log(trace: list[TraceStep]) -> list[str]:
    """The whole run, one line per step a reader follows (``step_log``)."""
    return [line for t in trace if (line := step_log(t)) is not None]
