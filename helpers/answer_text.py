"""How short answers are written and compared, shared by the answer step and the scorer: the
standard normalisation of QA benchmarks, the shape of a question (yes/no, or a choice between
two options) and the dates of a comparison."""
from __future__ import annotations

import re
import string
import unicodedata
from typing import Callable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    """The standard answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


_OPENERS = re.compile(r"^(is|are|was|were|do|does|did|has|have|had|can|could|will|would|should)\s+", re.I)
_OR = re.compile(r"\s+or\s+")
_AND = re.compile(r"\s+and\s+")
_AMONG = re.compile(r"\b(?:out of|between)\s+(.+)$")
_ASKS_WHICH = re.compile(r"^(which|who|whose|whom)\b", re.IGNORECASE)
# small words a name may hold in lower case ("House of Orange", "Ludwig van Beethoven")
NAME_LINKS = {"of", "the", "and", "de", "del", "della", "di", "da", "du", "des", "la", "le", "von", "van", "der",
              "den", "y", "bin", "ibn", "mac", "al", "&", "-"}


def name_word(word: str) -> bool:
    """True for a word a name (or a date) may hold: capitalised, a number, an opening bracket or
    quote, or one of the ``NAME_LINKS``."""
    return word[:1].isupper() or word[:1].isdigit() or word[:1] in "(\"'" or word.lower() in NAME_LINKS


def trim_links(words: list[str]) -> list[str]:
    """``words`` without ``NAME_LINKS`` at either end."""
    while words and words[0].lower() in NAME_LINKS:
        words = words[1:]
    while words and words[-1].lower() in NAME_LINKS:
        words = words[:-1]
    return words


def leading_name(text: str) -> str:
    """The name that begins ``text`` (up to the first lower-case word that is no link, or "?")."""
    words = text.rstrip().rstrip("?").split()
    end = 0
    while end < len(words) and name_word(words[end]):
        end += 1
    return " ".join(trim_links(words[:end]))


def said_about(answer: str, names: list[str], fits: Callable[[str], bool] = lambda part: True) -> str:
    """What a one-sentence answer says about one of ``names``: the first name, date or place after
    it that ``fits``.  "Frank Lloyd died on August 10, 1960" -> "August 10, 1960"; asked where,
    "Ann Lee died on 2 May 1990 in Leeds" -> "Leeds" (``fits`` refuses a date); "" when there is none."""
    for name in names:
        at = answer.lower().find(name.lower()) if name else -1
        if at < 0:
            continue
        words = re.sub(r"^(?:'s|’s)\b", "", answer[at + len(name):]).split()  # "Ann's mother is ..."
        while words:
            while words and (not name_word(words[0]) or words[0].lower() in NAME_LINKS):
                words = words[1:]
            found = leading_name(" ".join(words)).strip(" .,;:")
            if not found:
                break
            if not names_one_of(found, names) and fits(found):
                return found
            words = words[max(1, len(found.split())):]
    return ""


def question_options(question: str) -> list[str]:
    """The options an "A or B" (or "A, B or C") question offers, as it writes them, without a
    descriptor before a name ("the composer Ann Lee" -> "Ann Lee"); [] when it offers none.

    After a comma or colon ("Which film came out first, Blind Shaft or The Mask?"; the first comma
    whose rest splits in two, so a name may hold a comma: "Who lived longer, Sir Thomas Wheate,
    1st Baronet or Ann Lee?"; "the Nile, the Amazon or the Yangtze" and "A, B, or C" are three), after "out of" or
    "between" in a question that asks which or who ("Who was born first out of Ann Lee and Bob
    Roe?", not "What is the distance between Paris and Rome?"), or between a yes/no opener and the
    rest ("Was Ann Lee or Bob Roe born first?": the second name ends before its first lower-case
    word; "Is the director of Jaws American or British?": the first is as long as the second)."""
    body = question.strip().rstrip("?").strip()
    for mark in re.finditer(r"[,:]\s*", body):
        parts = [p.strip(" ,") for p in _OR.split(body[mark.end():])]
        if len(parts) == 2 and all(parts):
            listed = [p.strip() for p in parts[0].split(", ")]
            # a list, not a name holding a comma: "A, B, or C", or every item opens with "the"
            many = len(listed) > 1 and (", or " in body[mark.end():] or all(
                p.startswith("the ") for p in [*listed, parts[1]]))
            return _names([*listed, parts[1]] if many else parts)
    opener = _OPENERS.match(body)
    among = None if opener or not _ASKS_WHICH.match(body) else _AMONG.search(body)
    if among and len(parts := _AND.split(among.group(1))) == 2:
        return _names(parts)
    parts = _OR.split(body[opener.end():]) if opener else []
    if len(parts) != 2:
        return []
    words = parts[1].split()
    name = next((i for i, w in enumerate(words) if i and w[0].islower() and w not in NAME_LINKS), len(words))
    first = parts[0].split()
    if any(w[0].islower() and w not in NAME_LINKS for w in first) and len(first) > name:
        first = first[-name:]  # a description, then the option: as many words as the second
    options = [" ".join(first), " ".join(words[:name])]
    return _names(options) if all(options) else []


def _names(options: list[str]) -> list[str]:
    """Each option without lower-case words before its name ("the composer Ann Lee" -> "Ann Lee")."""
    named = []
    for option in (o.strip() for o in options):
        words = option.split()
        start = next((i for i, w in enumerate(words) if w[:1].isupper() or w[:1].isdigit()), 0)
        named.append(" ".join(words[start:]) if start and len(words) > start else option)
    return named


def is_yes_no_question(question: str) -> bool:
    """A question answered by yes or no ("Are both films from the same country?"), not a choice
    between two things ("Was Ann Lee or Bob Roe born first?")."""
    return bool(_OPENERS.match(question.strip())) and not _OR.search(question)  # "A or B" offers options


def answer_choices(question: str) -> list[str]:
    """What the answer must be one of: ["yes", "no"], the two options, or [] (free text).
    The answer step and the chain's final call constrain their decoding to these."""
    return ["yes", "no"] if is_yes_no_question(question) else question_options(question)


def drop_echo(answer: str, asked: str) -> str:
    """The answer without a first part that only repeats what was asked: asked "When did Ermengarde
    of Tours die?", a small model answers "Ermengarde of Tours, 20 March 851" -> "20 March 851"."""
    head, sep, rest = answer.partition(", ")
    if sep and rest.strip() and normalise(head) and f" {normalise(head)} " in f" {normalise(asked)} ":
        return rest.strip()
    return answer


def names_one_of(answer: str, names: list[str]) -> bool:
    """True when ``answer`` names one of ``names`` (it holds all of that name's words: "Anna Lisbeth
    Christina Palme" names "Lisbeth Palme"), which a step about that person cannot give as its answer.
    Accents do not count ("Abu Ishaq" names "Abū Isḥāq").  A shorter name made of some of its words
    is another person ("Louis XV" beside "Louis, Dauphin of France (son of Louis XV)")."""
    said = set(_name_words(answer))
    return any((words := set(_name_words(n))) and words <= said for n in names)


def _name_words(text: str) -> list[str]:
    return normalise(without_accents(text)).split()


def without_accents(text: str) -> str:
    """``text`` with its accents dropped ("Abū Isḥāq" -> "Abu Ishaq")."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


_MONTHS = {m: n for n, m in enumerate(("january february march april may june july august september october "
                                       "november december").split(), start=1)}
_DAY_MONTH_YEAR = re.compile(r"\b(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{3,4})\b")
_MONTH_DAY_YEAR = re.compile(r"\b([A-Za-z]+)\.?\s+(\d{1,2}),?\s+(\d{3,4})\b")


def _full_dates(text: str):
    """Each date with a day that ``text`` writes: (as written, (year, month, day))."""
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for match in pattern.finditer(text):
            parts = dict(zip(order, match.groups()))
            if (month := _MONTHS.get(parts["m"].lower())) and 1 <= int(parts["d"]) <= 31:
                yield match.group(), (int(parts["y"]), month, int(parts["d"]))


def date_as_written(answer: str, texts: list[str]) -> str:
    """An answer that is one full date, written as the first of ``texts`` that holds the same date
    writes it: "August 10, 1960" -> "10 August 1960" when a source says "10 August 1960" (a small
    model often rewrites a date it copies; answers are scored against the sources' wording).
    Any other answer is returned as it is."""
    found = list(_full_dates(answer))
    if len(found) != 1 or normalise(answer) != normalise(found[0][0]):
        return answer
    for text in texts:
        for written, date in _full_dates(text):
            if date == found[0][1]:
                return written
    return answer


def only_a_date(text: str) -> bool:
    """True when ``text`` says a date and no name: "born December 19, 1993", "1938", "c. 870"
    (no answer to "where?" or "who?"); "Detroit, 1970" is not only a date."""
    words = re.sub(r"[,.;:()]", " ", text).split()
    return any(re.fullmatch(r"\d{3,4}", w) for w in words) and all(
        w.isdigit() or w.lower() in _MONTHS or not name_word(w) for w in words)


def names_a_date(text: str) -> bool:
    """True when ``text`` holds a number, a month's name or "century": it may give a date."""
    return any(c.isdigit() for c in text) or any(w in _MONTHS or w == "century" for w in normalise(text).split())


_EARLIER = re.compile(r"\b(first|earlier|earliest|older|oldest|before|sooner)\b", re.IGNORECASE)
_LATER = re.compile(r"\b(later|latest|last|younger|youngest|after|more recent(?:ly)?|most recent(?:ly)?)\b",
                    re.IGNORECASE)


def wants_earlier(question: str) -> bool | None:
    """True when a comparison asks for the earlier date ("born first", "older", "released earlier"),
    False for the later one ("died later", "younger"), None when it says neither (or both)."""
    earlier, later = bool(_EARLIER.search(question)), bool(_LATER.search(question))
    return earlier if earlier != later else None
