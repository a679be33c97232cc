"""How short answers are written and compared, shared by the answer step and the scorer: the
standard normalisation of QA benchmarks, and the options an "A or B" question offers."""
from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    """The standard answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def question_options(question: str) -> list[str]:
    """The options an "A or B" question offers after its last comma or colon ("Which film came out
    first, Blind Shaft or The Mask?" -> ["Blind Shaft", "The Mask"]); [] when it offers none."""
    body = question.strip().rstrip("?").strip()
    if not re.search(r"[,:]", body):
        return []
    clause = re.split(r"[,:]\s*", body)[-1]
    parts = [p.strip() for p in re.split(r"\s+or\s+", clause) if p.strip()]
    return parts if len(parts) >= 2 else []
