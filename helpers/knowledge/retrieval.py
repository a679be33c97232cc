"""Retrieval shared by every strategy: the one search they all make (``search``: pages found by
title, then dense or hybrid hits over several collections, each chunk once), merging hits
without duplicates, and laying chunks out as numbered, fenced prompt text."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

import numpy as np

from helpers.answer_text import without_accents
from helpers.config import SearchConfig
from helpers.knowledge.chunking import body_of
from helpers.knowledge.embeddings import Embedder
from helpers.knowledge.store import VectorStore
from helpers.models.llm import LLM
from helpers.prompts import fence
from helpers.results import Hit


def merge_hits(*groups: list[Hit]) -> list[Hit]:
    """All hits, each chunk once, most similar to its query first.

    Hits are compared by cosine ``similarity``, which means the same in every collection
    and search mode (hybrid fusion scores only rank chunks inside one collection)."""
    best: dict[str, Hit] = {}
    for hits in groups:
        for hit in hits:
            if hit.id not in best or hit.similarity > best[hit.id].similarity:
                best[hit.id] = hit
    return sorted(best.values(), key=lambda h: h.similarity, reverse=True)


def interleave(groups: list[list[Hit]], limit: int) -> list[Hit]:
    """The best hit of each query in turn, then the second best, and so on (each chunk once).

    Merging by raw score would let one broad query ("The Simpsons") crowd out a
    precise one ("animation studio season 4"); taking turns lets every query contribute.
    """
    picked: list[Hit] = []
    seen: set[str] = set()
    for rank in range(max((len(hits) for hits in groups), default=0)):
        for hits in groups:
            if rank < len(hits) and hits[rank].id not in seen:
                seen.add(hits[rank].id)
                picked.append(hits[rank])
    return picked[:limit]


def _grouped(hits: list[Hit], key) -> list[list[Hit]]:
    """Hits grouped by ``key``, most similar first inside each group, groups in order of their best hit."""
    groups: dict = {}
    for hit in sorted(hits, key=lambda h: h.similarity, reverse=True):
        groups.setdefault(key(hit), []).append(hit)
    return list(groups.values())


def document_of(hit: Hit) -> tuple[str, str]:
    """The document a chunk comes from: a file, or one record of a benchmark corpus."""
    return hit.source, hit.title


def by_document_in_turn(hits: list[Hit]) -> list[Hit]:
    """Each document's best chunk in turn, then the second best, ...: one long document does not fill every slot."""
    return interleave(_grouped(hits, document_of), len(hits))


def by_collection_in_turn(hits: list[Hit]) -> list[Hit]:
    """``hits`` reordered so that each collection gives a chunk in turn (its documents also take
    turns): a report written from the first n then hears from every collection and from several
    documents in each, not only from the closest ones."""
    return interleave([by_document_in_turn(group) for group in _grouped(hits, lambda h: h.collection)], len(hits))


def at_most_per_document(hits: list[Hit], limit: int) -> list[Hit]:
    """``hits`` in order, keeping at most ``limit`` chunks of any one document (0: no limit)."""
    if limit <= 0:
        return hits
    counts: dict[tuple[str, str], int] = {}
    kept = []
    for hit in hits:
        document = document_of(hit)
        counts[document] = counts.get(document, 0) + 1
        if counts[document] <= limit:
            kept.append(hit)
    return kept


def search_collections(store: VectorStore, embedder: Embedder, query: str, collections: list[str],
                       k: int = 5, mode: str = "dense", ranker: str = "rrf") -> list[Hit]:
    """Top-k per collection for one query, merged (empty collections give nothing).
    The query is embedded once for all collections."""
    if not collections:
        return []
    vector = embedder.embed([query])[0].tolist()
    groups = [store.search(name, query, embedder, k=k, mode=mode, ranker=ranker, vector=vector)
              for name in collections]
    return merge_hits(*groups)


def search(store: VectorStore, embedder: Embedder, query: str, collections: list[str], settings: SearchConfig, *,
           k: int | None = None, pages: Sequence[Hit] = (), max_per_document: int = 0, cut: bool = True) -> list[Hit]:
    """The one search every strategy makes: ``pages`` (found by title, ``lookup_pages``) first, then
    the best ``k`` chunks (default ``search.top_k``) of ``query`` over ``collections``, dense or hybrid
    as ``settings`` say (``cut=False``: the best k of each collection), each chunk once.  With
    ``max_per_document``, at most that many chunks of one document (more are fetched to fill k)."""
    k = k or settings.top_k
    found = search_collections(store, embedder, query, collections, k=k * 3 if max_per_document else k,
                               mode=settings.mode, ranker=settings.ranker)
    found = at_most_per_document(found, max_per_document)
    return list({hit.id: hit for hit in [*pages, *(found[:k] if cut else found)]}.values())


_QUALIFIER = re.compile(r"\s*\([^()]*\)$")  # "David Bradley (director)" -> "David Bradley"
_QUALIFIED = re.compile(r"\s*\([^()]*\)")  # the qualifier a text may write after a name


@lru_cache(maxsize=65536)  # every lookup compares a name with every title of a collection
def title_key(text: str) -> str:
    """``text`` as titles are compared: accents dropped, case folded, quotes and spaces evened out."""
    return " ".join(without_accents(text.replace("’", "'").replace("‘", "'")).casefold().split())


def matching_titles(name: str, titles: list[str], limit: int = 3) -> list[str]:
    """The titles that name ``name``: written the same way (case, accents and spacing aside), then
    the same name with a qualifier ("David Bradley" -> "David Bradley (director)"); at most ``limit``."""
    key = title_key(name)
    if len(key) < 3:
        return []
    exact = [t for t in titles if title_key(t) == key]
    qualified = [t for t in titles if t not in exact and title_key(_QUALIFIER.sub("", t)) == key]
    return (exact + qualified)[:limit]


def names_in(text: str, titles: list[str], limit: int = 3) -> list[str]:
    """The page names ``text`` mentions, in the order it mentions them (at most ``limit``): each a
    title, its qualifier aside ("David Bradley (director)" -> "David Bradley"), written in the text as
    a proper name (its first word capitalised; a one-word name not as the text's first word), the
    longer name where two overlap ("John Middleton Murry's wife" names "John Middleton Murry", not
    "John Middleton").  A lookup in the title index, no model call: it finds the pages of the films
    a comparison names, which a search by meaning may rank below unrelated pages."""
    words = list(re.finditer(r"\w+", text))
    keys = [title_key(w.group()) for w in words]
    starts: dict[str, list[tuple[str, ...]]] = {}
    for title in titles:
        name = tuple(title_key(w) for w in re.findall(r"\w+", _QUALIFIER.sub("", title)))
        if name and len("".join(name)) >= 3:
            starts.setdefault(name[0], []).append(name)
    capital = [w.group()[0].isupper() or w.group()[0].isdigit() for w in words]
    found = [(i, name) for i, key in enumerate(keys) for name in starts.get(key, ())
             if capital[i] and tuple(keys[i: i + len(name)]) == name and (i > 0 or len(name) > 1)]
    taken: list[tuple[int, tuple[str, ...]]] = []
    for i, name in sorted(set(found), key=lambda f: (-len(f[1]), f[0])):
        if all(i + len(name) <= j or j + len(other) <= i for j, other in taken):
            taken.append((i, name))
    exact = {title_key(t) for t in titles}
    names = []
    for i, name in sorted(taken):
        start, end = words[i].start(), words[i + len(name) - 1].end()
        qualifier = _QUALIFIED.match(text, end)  # "Dark River (2017 Film)" when that is a title
        if qualifier and title_key(text[start:qualifier.end()]) in exact:
            end = qualifier.end()
        names.append(text[start:end])
    return list(dict.fromkeys(names))[:limit]


def lookup_pages(store: VectorStore, embedder: Embedder, name: str, query: str, collections: list[str],
                 limit: int = 2) -> list[Hit]:
    """The pages titled ``name`` (see ``matching_titles``): the chunk of each that best matches
    ``query``, exact titles first.  Finds the page of an entity a search by meaning ranks low
    ("David Bradley" is near "Bradley Orr" in embedding space), at no model call."""
    if limit <= 0 or not name.strip():
        return []
    vector = None
    pages: list[Hit] = []
    for collection in collections:
        titles = matching_titles(name, store.titles(collection), limit)
        if not titles:
            continue
        vector = vector if vector is not None else embedder.embed([query])[0].tolist()
        best = {h.title: h for h in reversed(store.titled_chunks(collection, titles, vector))}  # each title's best
        pages += [best[t] for t in titles if t in best]
    return pages[:limit]


def named_pages(store: VectorStore, embedder: Embedder, text: str, collections: list[str],
                per_name: int = 2) -> tuple[list[str], list[Hit]]:
    """The names ``text`` mentions (``names_in``, over the titles of ``collections``) and their pages
    (``lookup_pages``, ``per_name`` each, the chunk that best matches ``text``); no model call."""
    if per_name <= 0:
        return [], []
    names = names_in(text, [t for c in collections for t in store.titles(c)])
    return names, [page for name in names for page in lookup_pages(store, embedder, name, text, collections, per_name)]


def numbered_chunks(hits: list[Hit], max_chars: int | None = None, start: int = 1, bodies: bool = False) -> str:
    """Chunks as ``[n] title / section`` headers over fenced text, for prompts (numbered from ``start``).
    ``bodies``: the text without the chunk's own title line, so the passage starts with a sentence (a
    small model asked for a sentence from a passage copies its first line, title or not)."""
    blocks = []
    for number, hit in enumerate(hits, start=start):
        text = body_of(hit.text, hit.title, hit.section) if bodies else hit.text
        text = text if max_chars is None else text[:max_chars]
        where = f"{hit.title} / {hit.section}" if hit.section else hit.title
        blocks.append(f"[{number}] {where}\n{fence(text)}")
    return "\n\n".join(blocks)


def fit_chunks(llm: LLM, hits: list[Hit], fixed_prompt: str, reserve: int,
               max_chunks: int | None = None) -> tuple[list[Hit], list[str]]:
    """The best-first prefix of ``hits`` whose prompt fits the context and the budget left,
    with ``reserve`` tokens kept for the reply.  Returns the kept hits and notes on what was left out."""
    notes = []
    if max_chunks is not None and len(hits) > max_chunks:
        notes.append(f"kept the first {max_chunks} of {len(hits)} chunks (synthesis_chunks)")
        hits = hits[:max_chunks]
    room = llm.prompt_room() - reserve - llm.count_tokens(fixed_prompt)
    kept, used = [], 0
    for hit in hits:
        cost = llm.count_tokens(hit.text) + 25
        if used + cost > room:
            notes.append(f"left out {len(hits) - len(kept)} chunk(s) that did not fit the context "
                         f"({llm.context_size} tokens) or the budget left")
            break
        kept.append(hit)
        used += cost
    return kept, notes


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def query_beside_title(query: str, title: str) -> str:
    """``query`` without the words of a page's ``title`` ("Where was Ann Lee born?" on the page "Ann
    Lee": "Where was born?").  Every sentence of a page speaks of its subject, so its name draws the
    query toward whichever sentences name it most ("Lee's third album ...") and away from the one that
    holds the fact ("Born in Leeds, she ...").  The query itself when fewer than two words are left."""
    words = {w.lower() for w in re.findall(r"\w+", title)}
    rest = [w for w in re.findall(r"[\w'-]+|[?]", query) if w.lower() not in words]
    return " ".join(rest).replace(" ?", "?") if sum(w != "?" for w in rest) >= 2 else query


def best_part(text: str, query: str, chars: int, embedder: Embedder | None = None, title: str = "") -> str:
    """``text`` in at most about ``chars`` characters.  A longer text keeps its first sentence (what
    the page is about), then the sentences closest in meaning to ``query`` that still fit, in the
    text's order, with "…" where sentences were left out: on a long page the fact a step asks for
    ("where did she die?") is often far below the first ``chars`` characters.  Closeness is measured
    to the query without the words of the page's ``title`` (``query_beside_title``).  Without an
    ``embedder``, or with fewer than three sentences, the text is simply cut."""
    sentences = _SENTENCE_END.split(text.strip())
    if len(text) <= chars or embedder is None or len(sentences) < 3:
        return text[:chars]
    first, rest = sentences[0], sentences[1:]
    if len(first) >= chars:
        return text[:chars]
    closeness = embedder.embed(rest) @ np.asarray(embedder.embed_query(query_beside_title(query, title)))
    kept, used = set(), len(first)
    for i in sorted(range(len(rest)), key=lambda i: -closeness[i]):
        if used + len(rest[i]) + 2 <= chars:
            kept.add(i)
            used += len(rest[i]) + 2
    parts, last = [first], -1
    for i in sorted(kept):
        parts.append(rest[i] if i == last + 1 else f"… {rest[i]}")
        last = i
    return " ".join(parts)
