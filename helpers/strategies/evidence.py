"""The evidence of one run: every search and what it returned, and the one rank order of its sources.

Evidence only grows: a passage a search returned is never thrown away, whatever a
model later says about it; judging may only move it down.  The rank order is
*turn order*: the best passage of each search in the order the searches ran (the
question's own search first), then the second best of each, and so on, each passage
once.  Every search thus places its best find near the top, which is what recall@k
rewards on multi-hop questions: the second hop's passage is found by a different
query than the first's.  An answer's own passages (the agent's) take turns with that
order (``answer_sources``), so an answer citing a wrong passage cannot push the best
passage found below second place.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from helpers.knowledge.retrieval import interleave
from helpers.results import CITATION, Hit, Source, number_sources


@dataclass
class EvidenceLog:
    searches: list[tuple[str, list[Hit]]] = field(default_factory=list)
    demoted: set[str] = field(default_factory=set)  # chunk ids a judge called unhelpful

    def add(self, query: str, hits: list[Hit]) -> None:
        """Record one search: its query and its hits, best first."""
        self.searches.append((query, list(hits)))

    def demote(self, ids: set[str]) -> None:
        """Move these passages below every other one (a judge found them unhelpful)."""
        self.demoted |= ids

    def ranked(self) -> list[Hit]:
        """Every passage found, in turn order; demoted ones last, in turn order too."""
        order = interleave([hits for _, hits in self.searches], limit=10**6)
        return [h for h in order if h.id not in self.demoted] + [h for h in order if h.id in self.demoted]

    def sources(self, answer: str, first: list[Hit] = ()) -> list[Source]:
        """Numbered sources: ``first`` (the passages the answer was written from, numbered as
        it cites them), then the rest of the evidence in rank order."""
        seen = {h.id for h in first}
        return number_sources(list(first) + [h for h in self.ranked() if h.id not in seen], answer)

    def answer_sources(self, answer: str, cited: list[Hit]) -> tuple[str, list[Source]]:
        """Numbered sources for an answer whose ``[1]``..``[k]`` are ``cited``: the cited passages and
        the rest of the evidence in rank order take turns (the answer's first passage, the best passage
        found, the answer's second, the second best, ...), each once; returns the answer with its
        citations renumbered to those places, and the sources."""
        order = interleave([list(cited), self.ranked()], limit=10**6)
        place = {h.id: n for n, h in enumerate(order, start=1)}

        def renumber(match) -> str:
            n = int(match.group(1))
            return f"[{place[cited[n - 1].id]}]" if 1 <= n <= len(cited) else match.group(0)

        answer = CITATION.sub(renumber, answer)
        return answer, number_sources(order, answer)
