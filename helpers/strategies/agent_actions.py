"""What the DeepSearch agent may do at one step, and how its replies are read.

* ``allowed_actions`` masks the actions that make no sense now, and
  ``action_schema`` turns the rest into one reply schema, so constrained
  decoding cannot pick a masked action or leave out an action's fields;
* ``looks_like_placeholder``, ``drop_repeated_sentences`` and ``has_substance``
  catch what small models write instead of content;
* ``cite_sources`` renumbers an answer's citations 1..k in the order it cites them.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, RootModel, create_model

from helpers.results import CITATION, Hit
from helpers.strategies.agent_memory import AgentMemory
from helpers.strategies.reports import SENTENCE_END

ACTIONS = ("search", "visit", "reflect", "answer")
MAX_QUERIES = 3  # per search step, after rewriting
MAX_QUERY_WORDS = 16  # a longer "query" is usually the question repeated, and it would eat the budget
KEYWORD_QUERY_WORDS = 8  # a request this short and without "?" is already a keyword query
_CITATION_LIST = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})+)\]")  # [2, 5]


class Rewrite(BaseModel):
    """The rewrite step's reply: better search queries."""

    queries: list[str] = Field(max_length=MAX_QUERIES)


def is_keyword_query(text: str) -> bool:
    """A request that is already a short keyword query (no question mark, at most
    ``KEYWORD_QUERY_WORDS`` words): rewriting has nothing to improve in it."""
    return "?" not in text and len(text.split()) <= KEYWORD_QUERY_WORDS


def without_citations(text: str) -> str:
    """``text`` with its passage citations (``[3]``, ``[2, 5]``) taken out."""
    return CITATION.sub(" ", _CITATION_LIST.sub(" ", text))


def allowed_actions(*, beast_mode: bool, has_evidence: bool, has_unvisited: bool, queue_full: bool,
                    answer_rejected: bool, search_stalled: bool = False, draft_due: bool = False) -> list[str]:
    """The actions the model may choose at this step.

    * beast mode: only ``answer``;
    * a draft is due (``agent.draft_every`` steps passed without an answer attempt): only
      ``answer`` when something was found; unlike beast mode, that answer is evaluated;
    * ``search`` is masked right after a search that found nothing new, unless
      nothing else is possible;
    * ``visit`` needs a document not read yet;
    * ``reflect`` needs something found first (gap questions about nothing are
      guesses) and room in the gap-question queue;
    * ``answer`` needs something found, and is masked right after a rejected answer.
    """
    if beast_mode or (draft_due and has_evidence and not answer_rejected):
        return ["answer"]
    allowed = []
    if has_unvisited:
        allowed.append("visit")
    if has_evidence and not queue_full:
        allowed.append("reflect")
    if has_evidence and not answer_rejected:
        allowed.append("answer")
    if not search_stalled or not allowed:
        allowed.insert(0, "search")
    return allowed


def step_models(allowed: list[str], collections: list[str], web_search: bool = False,
                max_visits: int = 2) -> dict[str, type[BaseModel]]:
    """One reply model per allowed action.  ``action`` is a one-value Literal and the
    action's own fields are required, so choosing an action means filling them in."""
    unknown = set(allowed) - set(ACTIONS)
    if not allowed or unknown:
        raise ValueError(f"allowed actions must be a non-empty subset of {ACTIONS}, got {allowed}")
    payloads: dict[str, dict[str, Any]] = {
        "search": {"queries": (list[str], Field(min_length=1, max_length=MAX_QUERIES,
                                                description="short keyword queries"))},
        "visit": {"visit": (list[int], Field(min_length=1, max_length=max_visits,
                                             description="passage numbers whose documents to read"))},
        "reflect": {"gap_questions": (list[str], Field(min_length=1, max_length=3,
                                                       description="new sub-questions"))},
        # references come first, so that an answer cut off at the token limit keeps them
        "answer": {"references": (list[int], Field(min_length=1, description="passage numbers used")),
                   "answer": (str, Field(min_length=1, description="the answer, citing passages as [n]"))},
    }
    if len(collections) > 1:
        payloads["search"]["collections"] = (list[Literal[tuple(collections)]], Field(
            default_factory=list, description="collections to search; empty means all"))
    if web_search:
        payloads["search"]["web"] = (bool, Field(default=False, description="also search the web"))
    return {action: create_model(f"{action.capitalize()}Step", action=(Literal[action], ...), **payloads[action])
            for action in allowed}


def action_schema(allowed: list[str], collections: list[str], web_search: bool = False,
                  max_visits: int = 2) -> type[BaseModel]:
    """The reply model for one step: a union of the allowed actions' models, told apart by
    ``action``.  Its JSON schema admits no other action, so constrained decoding cannot pick one."""
    models = list(step_models(allowed, collections, web_search, max_visits).values())
    if len(models) == 1:
        return models[0]
    return RootModel[Annotated[Union[tuple(models)], Field(discriminator="action")]]


def schema_actions(json_schema: dict) -> set[str]:
    """The actions a reply schema admits (read back from the JSON schema)."""
    branches = list(json_schema.get("$defs", {}).values()) or [json_schema]
    return {branch["properties"]["action"]["const"] for branch in branches}


def looks_like_placeholder(text: str) -> bool:
    """A copied format placeholder such as ``<keywords>``, or nothing at all."""
    text = text.strip()
    return not text or (text.startswith("<") and text.endswith(">")) or text in ("...", "…")


def drop_repeated_sentences(text: str) -> str:
    """Small models sometimes loop, writing the same sentence again and again: keep the first."""
    seen: set[str] = set()
    kept = []
    for sentence in SENTENCE_END.split(text.strip()):
        key = without_citations(sentence).strip().lower()
        if key not in seen:
            seen.add(key)
            kept.append(sentence)
    return " ".join(kept)


def has_substance(answer: str) -> bool:
    """An answer with some words besides citations (small models sometimes return only ``[1][2]``);
    a short factoid such as "Al Jean" or "1989" counts."""
    words = re.findall(r"\w{2,}", without_citations(answer))
    return not looks_like_placeholder(answer) and len(words) >= 1


def cite_sources(answer: str, references: list[int], memory: AgentMemory) -> tuple[str, list[Hit], list[str]]:
    """Renumber an answer's passage citations 1..k and return (answer, cited hits in order, notes).

    ``[2, 5]`` becomes ``[2][5]``; citations of unknown passages are removed; when
    the text cites nothing but the model listed references, they are appended.
    References listed but not cited follow the cited ones (marked not cited).
    """
    notes = []
    answer = _CITATION_LIST.sub(lambda m: "".join(f"[{n.strip()}]" for n in m.group(1).split(",")), answer)
    known = list(dict.fromkeys(int(x) for x in CITATION.findall(answer)))
    unknown = [n for n in known if memory.passage(n) is None]
    if unknown:
        answer = CITATION.sub(lambda m: "" if int(m.group(1)) in unknown else m.group(0), answer)
        notes.append(f"removed citations of passages that do not exist: {unknown}")
    cited = [n for n in known if n not in unknown]
    listed = [n for n in dict.fromkeys(references) if memory.passage(n) is not None]
    if not cited and listed:
        answer = answer.rstrip() + " " + "".join(f"[{n}]" for n in listed)
        cited = listed
        notes.append(f"the answer cited nothing inline; appended its listed references {listed}")
    order = cited + [n for n in listed if n not in cited]
    new_number = {old: new for new, old in enumerate(order, start=1)}
    answer = CITATION.sub(lambda m: f"[{new_number[int(m.group(1))]}]", answer)
    return answer.strip(), [memory.passage(n) for n in order], notes
