"""Hop-by-hop search ("chain"), after DeepSearcher's ChainOfRAG agent and IRCoT, with the plan
written as a small program:

    search the question -> plan: a program of steps (``program``) -> search each name it contains
    -> run the steps in order (``execute``): a lookup is searched and read (``read``), an operator
    runs in code (``operators``) -> the last step's result is the answer (``execute.decide``)

A multi-hop question names only its first thing; the second (a composer, a label) appears only
in the passage found for the first, so no search written before reading it can name it.  The
program therefore says what to find first and refers to it by number (``#1``) in later steps, and
what to do with what was found: compare dates or numbers, check an order, count the years between
two dates.  A small model plans a shape and reads one fact at a time far better than it answers
a multi-hop question off a pile of passages, and code never miscompares two dates.

Evidence only grows: the question's own search comes first and every passage any search returned
stays in the result, in turn order (``EvidenceLog``).
"""
from __future__ import annotations

import time

from helpers.config import Config
from helpers.errors import BudgetExceededError, DeepSearchLabError
from helpers.knowledge.embeddings import Embedder, get_embedder
from helpers.knowledge.store import VectorStore
from helpers.knowledge.vectorstore import open_store
from helpers.models.llm import LLM, Budget, make_llm
from helpers.prompts import PromptSet, as_prompt_set
from helpers.results import Hit, Result, TraceStep
from helpers.strategies.answer import NOT_FOUND
from helpers.strategies.chain.execute import Outcome, Run, decide, execute, facts_text
from helpers.strategies.chain.program import Program, Step, plan_program, refs, show
from helpers.strategies.chain.read import search_step
from helpers.strategies.evidence import EvidenceLog

__all__ = ["Program", "Step", "plan_program", "show", "run_chain", "run_program"]


def run_chain(question: str, config: Config, *, llm: LLM | None = None, store: VectorStore | None = None,
              embedder: Embedder | None = None, collections: list[str] | None = None,
              prompts: PromptSet | dict | None = None, program: Program | None = None) -> Result:
    """Answer ``question`` step by step; never raises for model misbehaviour.

    ``prompts`` (a ``PromptSet`` or ``{name: text}``) replaces any chain prompt with an edited text;
    ``program`` (a ``Program``, e.g. one the learner edited) is run instead of planning one.
    ``Result.sources`` lists every passage found, in turn order (see ``EvidenceLog``)."""
    prompts = as_prompt_set(prompts)
    started = time.perf_counter()
    c = config.chain
    llm = llm or make_llm(config, Budget(max_calls=c.max_calls, max_prompt_tokens=c.max_prompt_tokens))
    llm.repair_template = prompts.template("structured_repair")
    store = store or open_store(config)
    embedder = embedder or get_embedder(config.embedding)
    names = [n for n in (collections or store.list_collections()) if store.info(n).count > 0]
    result = Result(question, "chain", usage=llm.ledger,
                    settings={"max_hops": c.max_hops, "hop_passages": c.hop_passages, "top_k": config.search.top_k,
                              "mode": config.search.mode, "model": config.llm.model})
    run = Run(llm, store, embedder, names, config, prompts, EvidenceLog())
    outcomes: list[Outcome] = []
    answer = ""
    try:
        question_hits = search_step(store, embedder, question, names, config, result.trace)
        run.evidence.add(question, question_hits)
        if program is None:
            program, entry = plan_program(llm, question, c.max_hops, prompts)
            result.trace.append(entry)
        else:
            result.trace.append(TraceStep("plan", parsed=program.model_dump(), notes=["the program given was run"]))
        answer, outcomes = run_program(question, program, run, result.trace, question_hits, outcomes)
    except BudgetExceededError as exc:
        result.trace.append(TraceStep("budget", notes=[f"{exc}; answering with the facts found"]))
        answer = next((d.value for d in reversed(outcomes) if d.found), NOT_FOUND)
    except DeepSearchLabError as exc:  # a backend or database failure: report it in the result
        result.error = f"{type(exc).__name__}: {exc}"
    if answer:
        result.short_answer = answer
        said = answer if answer != NOT_FOUND else "The search found no fact that answers this question."
        found_text = facts_text(program, outcomes) if program is not None else "- none"
        result.answer = f"{said}\n\nWhat the steps found:\n{found_text}"
    result.sources = run.evidence.sources(answer)
    result.seconds = time.perf_counter() - started
    return result


def run_program(question: str, program: Program, run: Run, trace: list[TraceStep], question_hits: list[Hit] = (),
                outcomes: list[Outcome] | None = None) -> tuple[str, list[Outcome]]:
    """Search each name the program looks up on its own (no call; at most ``chain.max_names``),
    run its steps (``execute``, into ``outcomes`` when given) and decide the answer (``decide``):
    (the answer, each step's outcome)."""
    named = [s.about for s in program.steps if s.op == "lookup" and not refs(s.about)]
    for name in list(dict.fromkeys(named))[: run.config.chain.max_names]:
        run.evidence.add(name, search_step(run.store, run.embedder, name, run.collections, run.config, trace,
                                           entities=[name]))
    done = execute(program, run, trace, [] if outcomes is None else outcomes)
    answer, entries = decide(question, program, done, run, list(question_hits))
    trace.extend(entries)
    return answer, done
