"""The chain's plan: the question written as a small typed program (in the spirit of QDMR,
Wolfson et al., "Break It Down", 2020), which the learner can read, edit and run.

    "How old was the sculptor of the Brannock Fountain when it was unveiled?"
    #1 lookup  Brannock Fountain: Who sculpted the Brannock Fountain?
    #2 lookup  #1: When was #1 born?
    #3 lookup  Brannock Fountain: When was the Brannock Fountain unveiled?
    #4 age     #2, #3

A ``lookup`` step finds one fact about one thing (a name, or ``#n``: the answer of step n) by
searching and reading; every other step is an operator that code runs over earlier results
(``operators``).  The last step's result is the answer.  ``options`` are the things the question
asks to choose among, as it writes them.

The model writes the program under a JSON schema (decoding cannot leave it); ``check_program``
then finds what the schema cannot say (a reference that points forward, an operator with the
wrong number of inputs, an option the question does not write) and the model is asked once more
with those reasons.  This is the only place that reads the question's wording.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from helpers.answer_text import normalise, without_accents
from helpers.strategies.chain.read import asked_kind
from helpers.errors import StructuredOutputError
from helpers.knowledge.retrieval import title_key
from helpers.models.llm import LLM
from helpers.prompts import PromptSet, as_prompt_set, render
from helpers.results import TraceStep, traced

REFERENCE = re.compile(r"#(\d+)")  # "#2": the result of step 2
Op = Literal["lookup", "earliest", "latest", "most", "least", "same", "before", "years_between", "age"]
# what each operator takes from its inputs, and how many inputs it needs (min, max)
OPERATORS: dict[str, tuple[str, int, int]] = {
    "earliest": ("a date", 2, 6), "latest": ("a date", 2, 6), "most": ("a number", 2, 6),
    "least": ("a number", 2, 6), "same": ("", 2, 6), "before": ("a date", 2, 2),
    "years_between": ("a date", 2, 2), "age": ("a date", 2, 2),
}
CHOICE_OPS = ("earliest", "latest", "most", "least")
_LAST_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_ASKS_WH = re.compile(r"(?:in |at |from |by |of |for |with |under |to )?(?:what|which|who|whom|whose|where|when|how)\b",
                      re.IGNORECASE)
_COMPUTED = re.compile(r"\b(how old|age of|what age|how many years)\b", re.IGNORECASE)
_BARE_WHO = re.compile(r"\s*(?:who|what)\s+(?:is|was|are|were)\s+(.*?)[\s?]*$", re.IGNORECASE)  # the result is the input (and option) that wins
YES_NO_OPS = ("same", "before")


class Step(BaseModel):
    """One step: ``lookup`` (``about`` a thing, ``ask`` a simple question about it) or an operator
    over earlier results (``inputs``: "#n" each)."""

    op: Op
    about: str = Field(max_length=100, description="lookup: the thing the fact is about, a name or #n; else empty")
    ask: str = Field(max_length=200, description="lookup: a simple question that names it; else empty")
    inputs: list[str] = Field(max_length=6, description="operator: the steps it works on, as #n; lookup: empty")


class Program(BaseModel):
    """A plan: whether the question asks yes or no, the options it offers (as it writes them) and
    the steps; the last step's result is the answer."""

    yes_no: bool
    options: list[str] = Field(max_length=6)
    steps: list[Step] = Field(max_length=12)  # the decoding grammar stops a plan that runs on


def refs(text: str) -> list[int]:
    """The step numbers ``text`` refers to ("When was #1 born?" -> [1])."""
    return [int(n) for n in REFERENCE.findall(text)]


def step_refs(step: Step) -> list[int]:
    """The earlier steps ``step`` uses: its inputs, or the references in its subject and question."""
    return refs(" ".join(step.inputs)) if step.op != "lookup" else list(dict.fromkeys(refs(f"{step.about} {step.ask}")))


def answers_yes_no(program: Program) -> bool:
    """True when the answer is yes or no: the question asks so, or the last step checks something."""
    return program.yes_no or (bool(program.steps) and program.steps[-1].op in YES_NO_OPS)


def choices(program: Program) -> list[str]:
    """What the answer must be one of: yes/no, the options, or [] (free)."""
    return ["yes", "no"] if answers_yes_no(program) else list(program.options)


def wanted(program: Program) -> dict[int, str]:
    """For each lookup whose result an operator reads, what it must give ("a date", "a number")."""
    kinds: dict[int, str] = {}
    for step in program.steps:
        kind = OPERATORS.get(step.op, ("", 0, 0))[0]
        for n in step_refs(step) if kind else []:
            kinds.setdefault(n, kind)
    return kinds


def written_in(name: str, question: str) -> str:
    """``name`` as ``question`` writes it (case and accents aside), or "" when it does not."""
    key = normalise(without_accents(name))
    text = without_accents(question)
    if not key:
        return ""
    for match in re.finditer(re.escape(name.strip()), question, re.IGNORECASE):
        return match.group(0)
    for match in re.finditer(r"[\w'’&.\-]+(?:[\s,]+[\w'’&.\-]+)*", text):
        words = match.group(0).split()
        for start in range(len(words)):
            for end in range(len(words), start, -1):
                if normalise(" ".join(words[start:end])) == key:
                    return " ".join(words[start:end]).strip(",")
    return ""


def tidy_program(program: Program, question: str) -> tuple[Program, list[str]]:
    """Small repairs that need no model: blanks squeezed, options the question does not write
    dropped (an option is written as the question writes it), fields an op does not use cleared."""
    notes: list[str] = []
    options = []
    for option in program.options:
        written = written_in(" ".join(option.split()), question)
        if written and written not in options:
            options.append(written)
        elif not written and option.strip():
            notes.append(f"option {option!r} is not written in the question: dropped")
    steps = []
    for number, step in enumerate(program.steps, start=1):
        if step.op == "lookup":
            about, ask = " ".join(step.about.split()), " ".join(step.ask.split())
            if refs(ask) and not refs(about):
                notes.append(f"step {number} asks about #{refs(ask)[-1]}, not {about!r}: its subject is #{refs(ask)[-1]}")
                about = f"#{refs(ask)[-1]}"
            steps.append(Step(op="lookup", about=about, ask=ask, inputs=[]))
        else:
            steps.append(Step(op=step.op, about="", ask="", inputs=[i.strip() for i in step.inputs if i.strip()]))
    yes_no = program.yes_no or (bool(steps) and steps[-1].op in YES_NO_OPS)
    asks = _LAST_SENTENCE.split(question.strip())[-1]
    if yes_no and _ASKS_WH.match(asks):
        notes.append("the question asks what, which, who, where, when or how: not yes or no")
        yes_no = False
    return Program(yes_no=yes_no, options=options, steps=steps), notes


def check_program(program: Program, max_steps: int) -> list[str]:
    """What is wrong with ``program`` (an empty list when nothing is): each reason names the step.
    The structural problems (``check_structure``) stop a step from running; the others (a subject
    its question does not name, an input of the wrong kind...) are sent back to the model, and a
    program that keeps them still runs."""
    return check_structure(program, max_steps) + _check_sense(program)


def check_structure(program: Program, max_steps: int) -> list[str]:
    """The problems that stop a program from running: no step, too many, a reference that does not
    point back, a lookup with no question or subject, an operator's inputs that are no step numbers
    or not as many as it takes."""
    problems = []
    if not program.steps:
        return ["the program has no step"]
    if len(program.steps) > max_steps:
        problems.append(f"the program has {len(program.steps)} steps; at most {max_steps} are run")
    for number, step in enumerate(program.steps, start=1):
        where = f"step {number} ({step.op})"
        if any(not 1 <= n < number for n in step_refs(step)):
            problems.append(f"{where} refers to a step that does not come before it")
        if step.op == "lookup":
            if not step.ask or not re.search(r"\w", step.ask):
                problems.append(f"{where} asks no question")
            if not step.about:
                problems.append(f"{where} names no thing in 'about'")
        else:
            low, high = OPERATORS[step.op][1:]
            if not all(REFERENCE.fullmatch(i) for i in step.inputs):
                problems.append(f"{where}: every input must be a step number like #1")
            elif not low <= len(step.inputs) <= high:
                problems.append(f"{where} needs {low if low == high else f'{low} to {high}'} inputs, "
                                f"got {len(step.inputs)}")
    return problems


def _check_sense(program: Program) -> list[str]:
    """The problems a program can run with but that make its answer wrong."""
    problems = []
    for number, step in enumerate(program.steps, start=1):
        where = f"step {number} ({step.op})"
        if any(not 1 <= n < number for n in step_refs(step)):
            continue
        if step.op == "lookup" and step.about and step.ask:
            if not refs(step.about) and normalise(step.about) == normalise(step.ask):
                problems.append(f"{where} asks no fact about {step.about!r}")
            elif (bare := _BARE_WHO.match(step.ask)) and normalise(bare.group(1)) == normalise(step.about):
                problems.append(f"{where} asks who or what {step.about} is, which is no fact: ask one relation "
                                "or property of it")
            elif not refs(step.about) and _words(step.about) not in _words(step.ask):
                problems.append(f"{where} is about {step.about!r} but its question does not name it: name it, "
                                "or write #n for a thing an earlier step finds")
            if _COMPUTED.search(step.ask):
                problems.append(f"{where} asks for an age or a count of years, which a lookup cannot find: look "
                                "the dates up, then use age or years_between")
        elif step.op != "lookup" and all(REFERENCE.fullmatch(i) for i in step.inputs):
            problems += _input_kinds(program, number, where)
    if program.steps and program.yes_no and program.steps[-1].op not in (*YES_NO_OPS, "lookup"):
        problems.append(f"the question asks yes or no, but the last step ({program.steps[-1].op}) gives no yes "
                        "or no: end with 'same' or 'before'")
    choice = [s for s in program.steps if s.op in CHOICE_OPS]
    if len(program.options) >= 2 and choice:
        covered = {root_option(program, n) for n in step_refs(choice[-1])}
        for option in program.options:
            if option not in covered:
                problems.append(f"no input of the {choice[-1].op} step is about the option {option!r}")
    return problems


def _input_kinds(program: Program, number: int, where: str) -> list[str]:
    """Inputs of the wrong kind: a lookup that asks for a person or a place (or a date, where a
    number is needed) feeding an operator that works on dates or numbers."""
    needs = OPERATORS[program.steps[number - 1].op][0]
    problems = []
    for n in (n for n in step_refs(program.steps[number - 1]) if 1 <= n < number):
        source = program.steps[n - 1]
        gives = asked_kind(source.ask) if source.op == "lookup" else ""
        if needs and gives in ("a person", "a place") or (needs == "a number" and gives == "a date"):
            fix = ("look its date up in a step about #%d" % n if needs == "a date" else
                   "compare dates with earliest or latest, or compute a number first")
            problems.append(f"{where} needs {needs} from step {n}, which asks for {gives}: {fix}")
    return problems


def root(program: Program, number: int) -> str:
    """The named thing step ``number`` comes from: a lookup's subject, followed back through
    ``#n``; an operator's first input's."""
    seen = set()
    while 1 <= number <= len(program.steps) and number not in seen:
        seen.add(number)
        step = program.steps[number - 1]
        used = refs(step.about) if step.op == "lookup" else step_refs(step)
        if step.op == "lookup" and not used:
            return step.about
        if not used:
            return ""
        number = used[0]
    return ""


def root_option(program: Program, number: int) -> str:
    """The option step ``number`` is about (its ``root`` names it, or it names the root), or ""."""
    subject = _words(root(program, number))
    if not subject:
        return ""
    for option in program.options:
        key = _words(option)
        if key and (f" {key} " in f" {subject} " or f" {subject} " in f" {key} "):
            return option
    return ""


def _words(text: str) -> str:
    """``text`` as names are compared: the words alone, case and accents aside."""
    return " ".join(re.findall(r"\w+", title_key(text)))


def one_lookup(question: str) -> Program:
    """The program of last resort: the question itself, looked up."""
    step = Step.model_construct(op="lookup", about=question, ask=question, inputs=[])  # a question of any length
    return Program.model_construct(yes_no=False, options=[], steps=[step])


def show(program: Program) -> str:
    """The program as lines a learner reads ("#2 lookup  #1: When was #1 born?")."""
    lines = (["answers yes or no"] if answers_yes_no(program) else []) + \
        ([f"options: {', '.join(program.options)}"] if program.options else [])
    for number, step in enumerate(program.steps, start=1):
        body = f"{step.about}: {step.ask}" if step.op == "lookup" else ", ".join(step.inputs)
        lines.append(f"#{number} {step.op:<13} {body}")
    return "\n".join(lines)


def plan_program(llm: LLM, question: str, max_steps: int = 8,
                 prompts: PromptSet | dict | None = None) -> tuple[Program, TraceStep]:
    """The question as a checked ``Program``: one call (prompt ``chain_plan``), repaired in code
    (``tidy_program``), and asked once more with the reasons when ``check_program`` finds problems
    (prompt ``chain_plan_fix``).  A program still wrong after that is cut to its valid start, or
    the question is looked up as it is (``one_lookup``)."""
    prompts = as_prompt_set(prompts)
    trace: list[TraceStep] = []
    with traced(trace, llm.ledger, "plan", question=question) as entry:
        entry.prompts = [prompts.version("chain_plan")]
        entry.messages = [{"role": "user", "content": render("chain_plan", prompts.template("chain_plan"),
                                                             question=question)}]
        program, problems = _ask(llm, entry, question, max_steps)
        if problems and program is not None and not llm.has_room(calls=3):
            entry.notes.append("not asked again: the budget keeps its calls for the lookups")
        elif problems and program is not None:
            entry.notes.append("asked once more: " + "; ".join(problems))
            entry.prompts.append(prompts.version("chain_plan_fix"))
            entry.messages = [*entry.messages, {"role": "assistant", "content": entry.raw},
                              {"role": "user", "content": render("chain_plan_fix", prompts.template("chain_plan_fix"),
                                                                 problems="\n".join(f"- {p}" for p in problems))}]
            first_raw = entry.raw
            program, problems = _ask(llm, entry, question, max_steps)
            entry.raw = f"{first_raw}\n{entry.raw}"
        if problems and program is not None and not check_structure(program, max_steps):
            entry.notes.append(f"still {'; '.join(problems)}: run as it is")
        elif problems or program is None:
            program = valid_start(program, max_steps) if program is not None else None
            if program is None:
                entry.notes.append("no usable program: the question is looked up as it is")
                program = one_lookup(question)
            else:
                entry.notes.append(f"still {'; '.join(problems)}: kept the steps before the first that cannot run")
        entry.parsed = program.model_dump()
    return program, trace[0]


def _ask(llm: LLM, entry: TraceStep, question: str, max_steps: int) -> tuple[Program | None, list[str]]:
    try:
        reply = llm.structured(entry.messages, Program, step="plan", max_tokens=90 * max_steps, temperature=0.0)
    except StructuredOutputError as exc:
        entry.raw = exc.raw_replies[-1] if exc.raw_replies else ""
        entry.notes.append(f"no valid program ({exc.last_error})")
        return None, ["not a valid program"]
    entry.raw = reply.raw
    program, notes = tidy_program(reply.value, question)
    entry.notes.extend(notes)
    return program, check_program(program, max_steps)


def valid_start(program: Program, max_steps: int) -> Program | None:
    """The longest start of ``program`` that can run (``check_structure``), or None when not even
    its first step can."""
    for end in range(min(len(program.steps), max_steps), 0, -1):
        start = program.model_copy(update={"steps": program.steps[:end]})
        if not check_structure(start, max_steps):
            return start
    return None
