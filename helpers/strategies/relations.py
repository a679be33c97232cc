"""Family relations planned in code, and read as a family: "Who is X's paternal grandmother?" is
two lookups, the father of X and then his mother, and a small model plans that worse than a
table does.  Each lookup ("Who is the father of X?") is then read by having the model write down
X's whole family from the passages (``Family``) and taking the relative asked for: a small model
copies a family from a page far more reliably than it answers one question about it.

A relation word names a chain of simple relations (``RELATIONS``); ``relation_plan`` turns a
question about one person's relative into the chain's steps, with ``#n`` standing for the
answer of step n as in the chain's own plans:

    "Where did Mara Quill's father-in-law die?"
    -> ["Who is the spouse of Mara Quill?", "Who is the father of #1?", "Where did #2 die?"]
"""
from __future__ import annotations

import re

from pydantic import BaseModel

from helpers.answer_text import leading_name, name_word, names_one_of, trim_links

# each simple relation, and the field of a ``Family`` that holds it
FAMILY_FIELD = {"father": "father", "mother": "mother", "husband": "spouses", "wife": "spouses", "spouse": "spouses",
                "son": "children", "daughter": "children", "child": "children", "brother": "siblings",
                "sister": "siblings", "sibling": "siblings"}
# each relation as the simple relations it is made of, nearest first
RELATIONS: dict[str, tuple[str, ...]] = {
    "paternal grandfather": ("father", "father"),
    "paternal grandmother": ("father", "mother"),
    "maternal grandfather": ("mother", "father"),
    "maternal grandmother": ("mother", "mother"),
    "father-in-law": ("spouse", "father"),
    "mother-in-law": ("spouse", "mother"),
    "brother-in-law": ("spouse", "brother"),
    "sister-in-law": ("spouse", "sister"),
    "sibling-in-law": ("spouse", "sibling"),
    "son-in-law": ("child", "husband"),
    "daughter-in-law": ("child", "wife"),
    "child-in-law": ("child", "spouse"),
    "stepfather": ("mother", "husband"),
    "stepmother": ("father", "wife"),
    "uncle": ("father", "brother"),
    "aunt": ("father", "sister"),
    **{word: (word,) for word in FAMILY_FIELD},
}
_WORD = "|".join(sorted((re.escape(w) for w in RELATIONS), key=len, reverse=True))
_POSSESSIVE = re.compile(rf"(?:'s|’s|s')\s+({_WORD})\b", re.IGNORECASE)
_OF_FORM = re.compile(rf"\bthe\s+({_WORD})\s+of\s+", re.IGNORECASE)
_SIMPLE_STEP = re.compile(rf"^\s*who\s+(?:is|was|were|are)\s+the\s+({'|'.join(FAMILY_FIELD)})\s+of\s+(.+?)[\s?]*$",
                          re.IGNORECASE)
_ONLY_WHO = re.compile(r"^\s*who(?:m)?\s+(?:is|was|were|are)\s+(#\d+)\s*\??\s*$", re.IGNORECASE)


def _name_before(text: str) -> str:
    """The name that ends ``text`` (its trailing run of capitalised words and joiners)."""
    words = text.split()
    start = len(words)
    while start > 0 and name_word(words[start - 1]):
        start -= 1
    return " ".join(trim_links(words[start:]))


def find_relation(question: str) -> tuple[str, str, str] | None:
    """(the words that ask for the relative, the relation, the person) when ``question`` asks about
    exactly one named person's relative, else None.  "What nationality is Mara Quill's husband?"
    -> ("Mara Quill's husband", "husband", "Mara Quill")."""
    found = []
    for match in _POSSESSIVE.finditer(question):
        person = _name_before(question[: match.start()])
        if person:
            span = question[question.rindex(person, 0, match.start()): match.end()]
            found.append((span, match.group(1).lower(), person))
    for match in _OF_FORM.finditer(question):
        person = leading_name(question[match.end():])
        if person:
            span = question[match.start(): question.index(person, match.end()) + len(person)]
            found.append((span, match.group(1).lower(), person))
    return found[0] if len(found) == 1 else None


def relation_plan(question: str) -> tuple[str, list[str]] | None:
    """(the person, the steps) for a question about one named person's relative: one step per
    simple relation, then the question itself about the relative found (dropped when it only asks
    who the relative is).  None when the question asks no such thing."""
    found = find_relation(question)
    if found is None:
        return None
    span, relation, person = found
    steps = []
    for number, simple in enumerate(RELATIONS[relation], start=1):
        steps.append(f"Who is the {simple} of {person if number == 1 else f'#{number - 1}'}?")
    rest = question.replace(span, f"#{len(steps)}", 1)
    if not _ONLY_WHO.match(rest):
        steps.append(rest)
    return person, steps


class Family(BaseModel):
    """A person's family as the passages state it ("" or [] where they do not say)."""
    father: str
    mother: str
    spouses: list[str]
    children: list[str]
    siblings: list[str]


def simple_relation(step: str) -> tuple[str, str] | None:
    """(the relation, the person) for a step that asks one simple family relation of a named
    person ("Who is the mother of Mara Quill?" -> ("mother", "Mara Quill")), else None."""
    match = _SIMPLE_STEP.match(step)
    if match is None or "#" in match.group(2):
        return None
    return match.group(1).lower(), match.group(2).strip()


def relative_in(family: Family, relation: str, not_named: list[str]) -> str:
    """The first relative of kind ``relation`` in ``family`` that is none of ``not_named`` (the
    person, whom a small model sometimes lists as their own relative), or ""."""
    found = getattr(family, FAMILY_FIELD[relation])
    for name in [found] if isinstance(found, str) else found:
        name = " ".join(name.split()).strip(" .")
        if name and not names_one_of(name, not_named):
            return name
    return ""
