"""Parsing, repair and retry of model replies (no model needed: a scripted backend)."""
from __future__ import annotations

import pytest
from pydantic import BaseModel
from scripted import Seq, StepScriptedBackend

from helpers.errors import BudgetExceededError, StructuredOutputError
from helpers.models.llm import LLM, Budget
from helpers.models.structured import ReplyParseError, parse_reply


class SubQueries(BaseModel):
    queries: list[str]


class Route(BaseModel):
    collections: list[str]
    query: str


GOOD = {"queries": ["a", "b"]}

# (reply, expected value or None when it must be rejected)
TABLE = [
    ('{"queries": ["a", "b"]}', GOOD),
    ('```json\n{"queries": ["a", "b"]}\n```', GOOD),
    ('Sure! Here you go:\n{"queries": ["a", "b"]}\nHope this helps.', GOOD),
    ('<think>Let me think about {braces} and more</think>{"queries": ["a", "b"]}', GOOD),
    ('{"queries": ["a", "b"', GOOD),                      # truncated: repaired
    ('{"queries": ["a", "b"],}', GOOD),                   # trailing comma
    ("{'queries': ['a', 'b']}", GOOD),                    # single quotes
    ('["a", "b"]', GOOD),                                 # bare list for a one-list schema
    ('{"Queries": ["a", "b"]}', GOOD),                    # key case
    ('{"sub_queries": ["a", "b"]}', None),                # wrong key: rejected, retried
    ('', None),                                           # empty
    ('I cannot answer that.', None),                      # prose only
    ('<think>I will answer {"queries": ["x"]} soon', None),  # unclosed think hides everything
    ('{"queries": "a"}', None),                           # wrong type
    ('{"queries": [1, {"x": 2}]}', None),                 # wrong item types
]


@pytest.mark.parametrize("reply,expected", TABLE)
def test_reply_table(reply, expected):
    if expected is None:
        with pytest.raises(ReplyParseError):
            parse_reply(reply, SubQueries)
    else:
        assert parse_reply(reply, SubQueries).model_dump() == expected


def test_nested_fields_with_wrong_case_and_prose():
    reply = 'Routing: {"Collections": ["simpsons_reception"], "QUERY": "ratings over time"} done'
    assert parse_reply(reply, Route) == Route(collections=["simpsons_reception"], query="ratings over time")


def test_strings_with_brackets_are_not_cut():
    reply = '{"queries": ["what is [x]?", "a } b"]} trailing {junk'
    assert parse_reply(reply, SubQueries).queries == ["what is [x]?", "a } b"]


def test_retry_feeds_the_error_back_and_succeeds():
    backend = StepScriptedBackend({"decompose": Seq("nonsense", '{"queries": ["ok"]}')})
    llm = LLM(backend, retries=2)
    reply = llm.structured([{"role": "user", "content": "split it"}], SubQueries, step="decompose")
    assert reply.value.queries == ["ok"] and reply.attempts == 2
    retry_prompt = backend.calls[1]["messages"][-1]["content"]
    assert "could not be used" in retry_prompt and "queries" in retry_prompt
    assert llm.ledger.calls == 2


def test_retries_are_bounded_then_typed_error_names_the_step():
    backend = StepScriptedBackend({"route": "nope"})
    llm = LLM(backend, retries=2)
    with pytest.raises(StructuredOutputError) as info:
        llm.structured([{"role": "user", "content": "x"}], SubQueries, step="route")
    assert info.value.step == "route"
    assert info.value.raw_replies == ["nope"] * 3
    assert len(backend.calls) == 3  # exactly 1 + 2 retries were used


def test_report_rendering_drops_debris_echoed_headings_and_merges_sections():
    from helpers.strategies.reports import render_report, report_schema

    report = report_schema(3).model_validate({"overview": "It changed.", "sections": [
        {"heading": "Cast", "points": [{"text": "Cast", "sources": [1]}]},
        {"heading": "Look", "points": [{"text": "It went HD in 2009 sections': [{\"heading", "sources": [2, 2]}]},
        {"heading": "look", "points": [{"text": "Colour went digital.", "sources": [3]}]}]})
    assert render_report(report) == "It changed.\n\n## Look\n\nIt went HD in 2009 sections [2] Colour went digital. [3]"


def test_a_quoted_title_keeps_its_quotes_and_an_unpaired_quote_at_an_end_goes():
    from helpers.strategies.reports import clean_text

    assert clean_text('"Zombie Simpsons" is a term for the later seasons.') == \
        '"Zombie Simpsons" is a term for the later seasons.'
    assert clean_text('It aired in 2009."') == "It aired in 2009."
    assert clean_text('"It aired in 2009.') == "It aired in 2009."


class Done(BaseModel):
    answer: str


def test_reserved_tokens_are_left_for_the_final_call():
    llm = LLM(StepScriptedBackend({"step": "ok", "final": {"answer": "done"}}, prompt_tokens=100),
              budget=Budget(max_total_tokens=400))
    llm.reserve(250)
    assert llm.has_room(prompt_tokens=100) and not llm.has_room(prompt_tokens=200)
    llm.chat([{"role": "user", "content": "go"}], step="step")                  # ~100 prompt tokens
    with pytest.raises(BudgetExceededError, match="250 of them kept for the final call"):
        llm.chat([{"role": "user", "content": "go"}], step="step")
    reply = llm.structured([{"role": "user", "content": "go"}], Done, step="final", final=True)
    assert reply.value.answer == "done"                                          # the final call may use them
