"""The chain's answer (``helpers.strategies.chain``), decided with as few model calls as the facts
allow: the last step's answer for one chain of steps, the dates for "which came first", else one
short call on the facts; when only a chain's last link is missing, the answer step on that link's
question; when the facts give nothing, the naive reader on the passages."""
from __future__ import annotations

from pydantic import create_model

from helpers.answer_text import answer_choices, is_yes_no_question, wants_earlier
from helpers.errors import StructuredOutputError
from helpers.knowledge.retrieval import title_key
from helpers.models.llm import LLM
from helpers.prompts import PromptSet, as_prompt_set, fence, prompt_version, render
from helpers.results import Hit, TraceStep, traced
from helpers.strategies.answer import NOT_FOUND, read_short_answer
from helpers.strategies.chain_hops import Hop, facts_text, found_answers, one_chain, refuse_subject, step_subjects
from helpers.strategies.reports import ASKS_FOR, answer_field
from helpers.values import Date, extreme, parse_date


def compared_by_dates(question: str, names: list[str], hops: list[Hop]) -> str | None:
    """The option a "which came first / who was born later" question asks for, decided by comparing
    the dates the steps found for each option (the last dated answer of each option's chain of
    steps), not by the model: a small model compares two dates no better than a coin.  None when the
    question names fewer than two options, says no direction, or an option has no date."""
    earlier = wants_earlier(question)
    options = [n for n in names if title_key(n) in title_key(question)]
    if earlier is None or len(options) < 2 or is_yes_no_question(question):
        return None
    dates: dict[str, Date] = {}
    for hop, subject in zip(hops, step_subjects(hops, names)):
        if subject in options and hop.answered and (date := parse_date(hop.answer)):
            dates[subject] = date
    if set(dates) != set(options):
        return None
    best = extreme(list(dates.values()), earlier)
    return None if best is None else list(dates)[best]


def chained_answer(question: str, steps: list[str], hops: list[Hop]) -> str | None:
    """The last step's answer, when the question is one chain of steps ("Who is X's mother?", "When
    did #1 die?", ``one_chain``) and every step found its fact.  Then no answer call is needed, and
    none can give the intermediate entity instead.  A chain with a missing link gives no answer."""
    if not one_chain(question, steps) or len(hops) != len(steps) or not all(hop.answered for hop in hops):
        return None
    return hops[-1].answer


def answer_from_facts(llm: LLM, question: str, hops: list[Hop],
                      template: str | None = None) -> tuple[str, TraceStep]:
    """A short answer written from the steps' answers (not from whole passages), after naming what
    kind of thing the answer must be."""
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "answer", question=question) as entry:
        entry.prompts = [prompt_version("chain_answer", template)]
        entry.messages = [{"role": "user", "content": render("chain_answer", template, question=question,
                                                             facts=fence(facts_text(hops)))}]
        try:
            schema = create_model("FinalAnswer", asks_for=ASKS_FOR, answer=answer_field(answer_choices(question)))
            reply = llm.structured(entry.messages, schema, step="answer", max_tokens=80, temperature=0.0)
            entry.raw, answer = reply.raw, " ".join(reply.value.answer.split())
        except StructuredOutputError as exc:
            entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
            answer = found_answers(hops)
            entry.notes.append(f"no valid answer ({exc.last_error}); answering with the facts themselves")
        entry.parsed = answer
    return answer, trace[0]


def answer_from_passages(llm: LLM, question: str, hops: list[Hop], question_hits: list[Hit],
                         prompts: PromptSet | None = None) -> tuple[str, TraceStep]:
    """The answer read off passages by the same reader as naive RAG (``read_short_answer``): the last
    step's best passages (about the entity the chain reached) and the question's own best ones."""
    last = hops[-1].hits[:3] if hops else []
    hits = list({hit.id: hit for hit in [*last, *question_hits[:2]]}.values())
    short, _, entry = read_short_answer(llm, question, hits, len(hits), prompts=prompts)
    entry.notes.insert(0, "the facts gave no answer: read from the last step's and the question's passages")
    return short.answer, entry


def last_link_question(question: str, steps: list[str], hops: list[Hop]) -> str | None:
    """The last step's question, references filled in ("Why did Katherine Mansfield die?"), when the
    question is one chain of steps whose every link but the last was found: that simple question
    is what is left to answer, and a small model reads one simple question off passages far better
    than the whole multi-hop question.  None otherwise."""
    if not one_chain(question, steps) or len(hops) != len(steps) or hops[-1].answered:
        return None
    return hops[-1].query if all(hop.answered for hop in hops[:-1]) else None


def answer_last_link(llm: LLM, asked: str, hops: list[Hop], about: list[str],
                     prompts: PromptSet | None = None) -> tuple[str, TraceStep]:
    """The last link read again by the answer step's reader (which writes the facts before it
    answers) on the last step's best passages; "not found" when it names what the step is about."""
    short, _, entry = read_short_answer(llm, asked, hops[-1].hits[:3], 3, prompts=prompts)
    entry.notes.insert(0, "the last step's read found nothing: its question read again by the answer step")
    return refuse_subject(short.answer, about, entry), entry


def final_answer(llm: LLM, question: str, steps: list[str], names: list[str], hops: list[Hop],
                 question_hits: list[Hit] = (), prompts: PromptSet | None = None) -> tuple[str, list[TraceStep]]:
    """The chain's answer from its steps' findings, and the trace of how it was decided: the last
    step's answer for one chain of steps (``chained_answer``), the option the dates decide for a
    which-came-first question (``compared_by_dates``), else one call on the facts
    (``answer_from_facts``).  When one chain's last step alone found nothing, its question is read
    again by the answer step (``answer_last_link``).  When the facts still give nothing, the
    passages are read for the whole question (``answer_from_passages``); for one chain of steps, a
    reply that names the question's names or an earlier step's answer (asked for the director's
    child, the director) counts as not found."""
    prompts = as_prompt_set(prompts)
    if (last := chained_answer(question, steps, hops)) is not None:
        return last, [TraceStep("answer", len(hops), parsed=last, notes=[
            "one chain of steps: its last step's answer is the answer (no call)"])]
    if (option := compared_by_dates(question, names, hops)) is not None:
        return option, [TraceStep("answer", len(hops), parsed=option, notes=[
            "the dates the steps found decide the comparison (no call)"])]
    entries = []
    about = list(dict.fromkeys([*names, *(hop.answer for hop in hops[:-1] if hop.answered)]))
    if (asked := last_link_question(question, steps, hops)) is not None and llm.has_room(calls=2):
        answer, entry = answer_last_link(llm, asked, hops, about, prompts)
        entries.append(entry)
        if NOT_FOUND not in answer.lower():
            return answer, entries
    if any(hop.answered for hop in hops) and not one_chain(question, steps):
        answer, entry = answer_from_facts(llm, question, hops, prompts.template("chain_answer"))
        entries.append(entry)
        if NOT_FOUND not in answer.lower():
            return answer, entries
    answer, entry = answer_from_passages(llm, question, hops, list(question_hits), prompts)
    if one_chain(question, steps):  # the end of a chain is none of its links
        answer = refuse_subject(answer, about, entry)
    return answer, entries + [entry]
