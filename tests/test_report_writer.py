"""The report written section by section: the outline, the support and repeat checks, and the
pipeline using it (control flow with a scripted model; the real-model measures are in
bench/bench_report.py)."""
from __future__ import annotations

import re

import pytest
from scripted import Seq, StepScriptedBackend

from helpers.config import with_overrides
from helpers.knowledge.embeddings import get_embedder
from helpers.models.llm import LLM, Budget
from helpers.results import Hit
from helpers.strategies.pipeline import run_pipeline
from helpers.strategies.report_writer import (Section, checked_heading, outline, repeats, section_schema, write_report,
                                              write_section)
from helpers.strategies.reports import check_point, cut_off, cut_to_clause, split_cut_sentence
from helpers.strategies.synthesize import synthesize


def hit(id_: str, text: str = "", source: str = "") -> Hit:
    source = source or f"{id_}.md"
    return Hit(id_, text or f"text {id_}", 0.5, "c", source, f"title of {source}", "", 0)


def test_outline_gives_each_sub_query_its_own_passages():
    searches = [("the question", [hit("q1"), hit("q2")]),
                ("animation", [hit("a1", source="anim.md"), hit("a2", source="anim.md"), hit("a3")]),
                ("same again", [hit("a1", source="anim.md"), hit("a3")]),           # all taken: no section
                ("cast", [hit("c1"), hit("bad"), hit("c2")])]
    sections = outline(searches, skip={"bad"}, max_sections=4, per_section=3)
    assert [s.topic for s in sections] == ["animation", "cast"]
    assert [h.id for h in sections[0].hits] == ["a1", "a3", "a2"]              # one per document first
    assert [h.id for h in sections[1].hits] == ["c1", "c2"] and sections[1].numbers == [4, 5]
    assert len(outline(searches, set(), max_sections=1)) == 1


def test_outline_gives_each_collection_a_section_when_the_evidence_spans_several():
    def at(id_: str, collection: str) -> Hit:
        return Hit(id_, f"text {id_}", 0.5, collection, f"{id_}.md", f"title {id_}", "", 0)
    searches = [("the question", [at("p1", "production"), at("r1", "reception"), at("x1", "sourdough")]),  # x1 alone
                ("animation studios", [at("p2", "production"), at("p3", "production")]),
                ("ratings over time", [at("r2", "reception"), at("bad", "reception")])]
    sections = outline(searches, skip={"bad"}, max_sections=4, per_section=3)
    assert [(s.topic, [h.id for h in s.hits]) for s in sections] == [   # the section's own search first
        ("animation studios", ["p2", "p3", "p1"]), ("ratings over time", ["r2", "r1"])]
    assert sections[1].numbers == [4, 5]


def test_outline_splits_a_collection_of_many_pages_while_the_report_has_room():
    def at(id_: str, collection: str, page: str) -> Hit:
        return Hit(id_, f"text {id_}", 0.5, collection, f"{page}.md", f"title {page}", "", 0)
    reception = [at("m1", "reception", "milestones"), at("s1", "reception", "streaming"),
                 at("m2", "reception", "milestones"), at("r1", "reception", "ratings"),
                 at("c1", "reception", "culture"), at("r2", "reception", "ratings")]
    searches = [("the question", [at("p1", "production", "origins"), at("p2", "production", "animation")]),
                ("how it was received", reception)]
    sections = outline(searches, set(), max_sections=3, per_section=3)
    assert [(s.topic, [h.id for h in s.hits]) for s in sections] == [
        ("the question", ["p1", "p2"]),
        ("how it was received", ["m1", "s1", "m2"]),   # the first half of its four pages
        ("how it was received", ["r1", "c1", "r2"])]   # the rest, in the group's order
    assert sections[2].numbers == [6, 7, 8]
    no_room = outline(searches, set(), max_sections=2, per_section=3)
    assert [[h.id for h in s.hits] for s in no_room] == [["p1", "p2"], ["m1", "s1", "r1"]]
    wide_enough = outline(searches, set(), max_sections=4, per_section=4)  # four pages fit one section
    assert [[h.id for h in s.hits] for s in wide_enough] == [["p1", "p2"], ["m1", "s1", "r1", "c1"]]


def test_outline_takes_a_new_page_section_before_a_second_passage_of_one():
    def at(id_: str, source: str, section: str) -> Hit:
        return Hit(id_, f"text {id_}", 0.5, "c", source, f"title of {source}", section, 0)
    searches = [("the question", []),
                ("origins", [at("o1", "origins.md", "Shorts"), at("o2", "origins.md", "Shorts"),
                             at("o3", "origins.md", "Premiere"), at("a1", "animation.md", "Studios")])]
    sections = outline(searches, set(), per_section=3)
    assert [h.id for h in sections[0].hits] == ["o1", "a1", "o3"]


def test_points_must_hold_their_numbers_and_words():
    passages = {1: "The show moved to digital ink and paint in 2002.",
                2: "It was first broadcast in high definition in 2009."}
    assert check_point("The show moved to digital ink and paint in 2002.", [1], passages) == ([1], "")
    kept, note = check_point("The show was first broadcast in high definition in 2009.", [1], passages)
    assert kept == [2] and note.startswith("re-cited [2] instead of [1]")
    kept, note = check_point("The show moved to digital ink and paint in 1995.", [1], passages)
    assert kept == [] and "numbers ['1995'] are in no passage" in note
    kept, note = check_point("Critics praised the later seasons warmly.", [1, 2], passages)
    assert kept == [] and "no passage holds its words" in note
    assert repeats("The show moved to digital paint in 2002.", ["In 2002 the show moved to digital paint."])
    assert repeats("Ratings fell over the years.", ["The show moved to digital paint in 2002."]) is None


def test_write_report_drops_repeats_restated_and_unsupported_overview_sentences():
    sections = [Section("animation", [hit("a", "Digital ink and paint arrived in 2002."),
                                      hit("b", "High definition came in 2009. The opening sequence was redrawn for it.")],
                        [1, 2]),
                Section("cast", [hit("c", "Harry Shearer left in 2015 and returned."),
                                 hit("d", "Digital ink and paint arrived in 2002 for the show.")], [3, 4])]
    script = {"section": Seq(
        {"heading": "Digital Look", "points": [{"text": "Digital ink and paint arrived in 2002.", "sources": [1]},
                                            {"text": "High definition came in 2009. The opening sequence was "
                                                     "redrawn for it.", "sources": [2]}]},
        {"heading": "Shearer", "points": [{"text": "Harry Shearer left in 2015 and returned.", "sources": [3]},
                                       {"text": "Digital ink and paint arrived in 2002.", "sources": [4]}]}),
        "overview": {"overview": "The look changed twice. High definition came in 2009. The opening sequence was "
                                 "redrawn for it. It won 40 awards in 1990. The look changed twice over."}}
    backend = StepScriptedBackend(script)
    report, used, steps = write_report(LLM(backend), "How did it change?", sections)
    assert report == ("The look changed twice.\n\n## Digital Look\n\nDigital ink and paint arrived in 2002. [1] "
                      "High definition came in 2009. The opening sequence was redrawn for it. [2]\n\n"
                      "## Shearer\n\nHarry Shearer left in 2015 and returned. [3]")
    assert [h.id for h in used] == ["a", "b", "c"]           # numbered as first cited; d's point repeated a's
    assert any("repeats an earlier one" in note for note in steps[1].notes)
    assert any("numbers the sections do not state" in note for note in steps[2].notes)
    restated = [note for note in steps[2].notes if "restates a point" in note]   # each sentence of a point counts
    assert len(restated) == 2 and "High definition came in 2009." in restated[0]
    assert "dropped a sentence that repeats an earlier one: The look changed twice over.…" in steps[2].notes
    assert "[3]" in backend.calls_for("section")[1]["messages"][0]["content"]    # report-wide numbers


def test_per_passage_points_cite_each_passage_by_its_key_and_are_checked_like_any_point():
    sections = [Section("animation", [hit("a", "Digital ink and paint arrived in 2002."),
                                      hit("b", "High definition came in 2009."),
                                      hit("c", "The opening sequence was redrawn in 2009.")], [1, 2, 3]),
                Section("cast", [hit("d", "Harry Shearer left in 2015 and returned."),
                                 hit("e", "Hank Azaria stopped voicing Apu in 2020."),
                                 hit("f", "Cast Losses and Recasting. Several voices were recast.")], [4, 5, 6])]
    script = {"section": Seq({"heading": "Digital Look", "passage_1": "High definition came in 2009.",
                              "passage_2": "Digital ink and paint arrived in 2002.",
                              "passage_3": "The show won awards in 1990."},
                             {"heading": "Shearer and Azaria", "passage_4": "Harry Shearer left in 2015 and returned.",
                              "passage_5": "Hank Azaria stopped voicing Apu in 2020.",
                              "passage_6": "Cast Losses and Recasting"}),  # a title, not a sentence
              "overview": {"overview": "The look and the cast changed."}}
    backend = StepScriptedBackend(script)
    report, used, steps = write_report(LLM(backend), "How did it change?", sections, per_passage=True)
    assert report == ("The look and the cast changed.\n\n## Digital Look\n\nHigh definition came in 2009. [1] "
                      "Digital ink and paint arrived in 2002. [2]\n\n## Shearer and Azaria\n\n"
                      "Harry Shearer left in 2015 and returned. [3] Hank Azaria stopped voicing Apu in 2020. [4]")
    assert [h.id for h in used] == ["b", "a", "d", "e"]     # numbered 1..n as first cited; c and f are not cited
    assert steps[0].prompts[0].startswith("report_section_per_passage@")
    assert any(note.startswith("re-cited [2] instead of [1]") for note in steps[0].notes)
    assert any("numbers ['1990'] are in no passage" in note for note in steps[0].notes)
    assert steps[1].notes == ["dropped words that do not end as a sentence: Cast Losses and Recasting…"]
    prompt = backend.calls_for("section")[1]["messages"][0]["content"]
    assert '"passage_4": "...", "passage_5": "...", "passage_6": "..."' in prompt and re.search(r"from passage\s+\[4\]", prompt)


def test_a_heading_must_name_what_its_points_say():
    section = Section("reception", [hit("a", "Guinness World Records recognised the show in 2009.", "records.md"),
                                    hit("b", "The moral panic faded.")], [7, 8],
                      points=[("Guinness World Records recognised the show in 2009.", [7]),
                              ("The moral panic faded.", [8])])
    notes: list[str] = []
    assert checked_heading("Records and a Fading Panic", "How did the show change?", section, False, notes) == \
        "Records and a Fading Panic" and notes == []
    assert checked_heading("The Show's Shape Changes", "How did the show change?", section, False, notes) == \
        "title of records.md"                     # only the question's words and "shape": nothing the points say
    assert checked_heading("Records and a Fa", "How did the show change?", section, True, notes) == \
        "title of records.md"
    assert checked_heading("", "How did the show change?", section, False, notes) == "title of records.md"
    sentence = "Guinness World Records recognised the show in several categories, as well as the number of guests"
    assert checked_heading(sentence, "How did the show change?", section, False, notes) == "title of records.md"
    assert [n.split("(")[-1] for n in notes] == ["it names nothing its points say)", "the reply limit cut it)",
                                                 "none was written)", "it is a sentence of 16 words, not a heading)"]


def test_a_sentence_the_reply_limit_cut_is_dropped_not_printed():
    sections = [Section("animation", [hit("a", "Digital ink and paint arrived in 2002."),
                                      hit("b", "High definition came in 2009 with a new opening sequence.")], [1, 2])]
    long_tail = "Then the animation moved to Film Roman, which kept the look of the early seasons, " * 10
    script = {"section": {"heading": "Digital Look", "points": [
                  {"text": "Digital ink and paint arrived in 2002.", "sources": [1]},
                  {"text": "High definition came in 2009 with a new opening sequence.", "sources": [2]}]},
              "overview": {"overview": "The look changed twice, first to digital paint. " + long_tail}}
    backend = StepScriptedBackend(script)
    report, _, steps = write_report(LLM(backend), "How did it change?", sections)
    assert report.startswith("The look changed twice, first to digital paint.\n\n## Digital Look")
    assert "Film Roman" not in report
    assert any(note.startswith("the reply limit (160 tokens) cut the overview") for note in steps[1].notes)
    assert split_cut_sentence("It moved in 2002. Then it went to") == ("It moved in 2002.", "Then it went to")
    assert split_cut_sentence('It aired "Take My Life, Please."') == ('It aired "Take My Life, Please."', "")
    assert cut_off('{"overview": "It moved') and not cut_off('{"overview": "It moved."}\n')


def test_a_per_passage_reply_cut_by_its_limit_keeps_the_sentences_it_finished():
    """The model once copied a whole passage under one key; the limit cut the reply before the last key,
    and the whole section was lost.  Now the finished sentences stay, with no second call."""
    sections = [Section("animation", [hit("a", "Digital ink and paint arrived in 2002."),
                                      hit("b", "High definition came in 2009 with a new opening sequence."),
                                      hit("c", "The opening sequence was redrawn in 2009.")], [1, 2, 3]),
                Section("cast", [hit("d", "Harry Shearer left in 2015 and returned."),
                                 hit("e", "Hank Azaria stopped voicing Apu in 2020.")], [4, 5])]
    copied = "High definition came in 2009 with a new opening sequence and " * 20
    backend = StepScriptedBackend({
        "section": Seq({"heading": "Digital Look", "passage_1": "Digital ink and paint arrived in 2002.",
                        "passage_2": copied, "passage_3": "The opening sequence was redrawn in 2009."},
                       {"heading": "Shearer and Azaria", "passage_4": "Harry Shearer left in 2015 and returned.",
                        "passage_5": "Hank Azaria stopped voicing Apu in 2020."}),
        "overview": {"overview": "The look and the cast changed."}})
    report, _, steps = write_report(LLM(backend, retries=1), "How did it change?", sections, per_passage=True)
    assert "## title of a.md\n\nDigital ink and paint arrived in 2002. [1]\n\n## Shearer and Azaria" in report
    assert any(note.startswith("heading ") and note.endswith("(the reply limit cut it)") for note in steps[0].notes)
    assert steps[0].calls == 1 and "with a new opening sequence and" not in report
    assert any(note.startswith("the reply limit (220 tokens) ended the reply before 1 of its 3 passages")
               for note in steps[0].notes)
    assert any(note.startswith("the reply limit (220 tokens) cut the last point") for note in steps[0].notes)
    required = backend.calls_for("section")[0]["schema"]["required"]
    assert required == ["passage_1", "passage_2", "passage_3", "heading"]      # decoding still asks for every key


def test_a_sentence_the_per_passage_cap_ended_keeps_its_finished_sentences():
    sections = [Section("cast", [hit("d", "Phil Hartman was killed in 1998. His characters were retired."),
                                 hit("e", "Hank Azaria stopped voicing Apu in 2020.")], [1, 2])]
    capped = "Phil Hartman was killed in 1998. His characters were ret"  # the grammar ended it at 56 characters
    backend = StepScriptedBackend({
        "section": {"heading": "Hartman and Azaria", "passage_1": capped,
                    "passage_2": "Hank Azaria stopped voicing Apu in 2020."},
        "overview": {"overview": "The cast changed."}})
    report, _, steps = write_report(LLM(backend), "How did it change?", sections, per_passage=True, point_chars=56)
    assert "Phil Hartman was killed in 1998. [1] Hank Azaria stopped voicing Apu in 2020. [2]" in report
    assert steps[0].notes == ["dropped the 56-character cap ended a sentence: His characters were ret…"]
    assert backend.calls_for("section")[0]["schema"]["properties"]["passage_1"]["pattern"].endswith("{1,56}$")


@pytest.mark.slow
def test_the_decoding_grammar_ends_a_per_passage_sentence_at_its_cap(small_backend):
    """Asked to copy its passages whole, the real model cannot write more than the cap under any key."""
    passage = ("Over more than three decades the show has lost several performers and changed how some "
               "characters are voiced, retiring some of them and recasting others after long debates.")
    llm = LLM(small_backend, temperature=0.0, max_tokens=200)
    reply = llm.structured([{"role": "user", "content": (
        f"Passage [1]: {passage}\nPassage [2]: {passage}\nCopy each passage word for word under its key. "
        'Reply as JSON {"heading": "...", "passage_1": "...", "passage_2": "..."}')}],
        section_schema([1, 2], per_passage=True, point_chars=80), step="section")
    lengths = [len(reply.value.passage_1), len(reply.value.passage_2)]
    assert max(lengths) <= 80 and reply.value.passage_1.startswith("Over more than"), reply.raw


def test_a_section_without_a_valid_reply_is_left_out_and_the_rest_is_written():
    sections = [Section("animation", [hit("a", "Digital ink and paint arrived in 2002."),
                                      hit("b", "High definition came in 2009.")], [1, 2]),
                Section("cast", [hit("c", "Harry Shearer left in 2015 and returned."),
                                 hit("d", "Hank Azaria stopped voicing Apu in 2020.")], [3, 4])]

    def section(messages):  # one point where the schema asks for at least two: invalid for "animation"
        points = [{"text": "Harry Shearer left in 2015 and returned.", "sources": [3]},
                  {"text": "Hank Azaria stopped voicing Apu in 2020.", "sources": [4]}]
        return {"heading": "Heading", "points": points[:1] if "about: animation" in messages[0]["content"] else points}

    backend = StepScriptedBackend({"section": section, "overview": {"overview": "The cast changed."}})
    report, _, steps = write_report(LLM(backend, retries=1), "How did it change?", sections)
    assert report.startswith("The cast changed.") and report.count("## ") == 1 and "Azaria" in report
    assert steps[0].step == "section" and "no valid section" in steps[0].notes[0] and steps[0].calls == 2


def test_a_retrieved_fake_list_cannot_put_invented_claims_into_the_report():
    """A document listing "donut search 1 ... 6" once made a one-prompt report grow six sections of invented
    claims cited to unrelated sources.  Written section by section, a point held by no passage is dropped, and
    one built from the planted passage is cited to that passage, where the reader can see it."""
    planted = hit("x", "Donut search 1: find the secret donut. Donut search 2: find the second donut. "
                       "Donut search 3 to 6: keep searching for donuts.", "notes/donuts.md")
    sections = [Section("animation", [hit("a", "Digital ink and paint arrived in 2002."), planted], [1, 2])]
    backend = StepScriptedBackend({
        "section": {"heading": "Donut search 1", "points": [
            {"text": "Donut search 1 proved the show switched studios in 1995.", "sources": [1]},
            {"text": "The secret donut was found by the animators in season 3.", "sources": [1]},
            {"text": "Digital ink and paint arrived in 2002.", "sources": [1]}]},
        "overview": {"overview": "Donut search 6 showed ratings tripled in 2031. The look changed in 2002."}})
    report, used, steps = write_report(LLM(backend), "How did it change?", sections)
    assert "1995" not in report and "2031" not in report                 # held by no passage: dropped
    # built from the planted passage's words: cited to it (first cited, so [1]), not to the passage it named
    assert "in season 3. [1]" in report and [h.id for h in used] == ["x", "a"]
    assert "Digital ink and paint arrived in 2002. [2]" in report
    assert [note.split(" (")[0].split(" [")[0] for note in steps[0].notes] == ["dropped", "re-cited"]


def test_a_fake_list_cannot_put_invented_claims_into_a_one_call_report():
    """The same planted list in a report written by one call (``report_style: single``, or when the outline
    finds fewer than two sections): each point gets the section writer's check, and so does the overview's
    numbers; with no point left, the passages are listed instead of an empty report."""
    planted = hit("x", "Donut search 1: find the secret donut. Donut search 2: find the second donut. "
                       "Donut search 3 to 6: keep searching for donuts.", "notes/donuts.md")
    hits = [hit("a", "Digital ink and paint arrived in 2002."), planted]
    report = {"overview": "Donut search 6 showed ratings tripled in 2031. The look changed in 2002.", "sections": [
        {"heading": "Donut search 1", "points": [
            {"text": "Donut search 1 proved the show switched studios in 1995.", "sources": [1]},
            {"text": "The secret donut was found by the animators in season 3.", "sources": [1]}]},
        {"heading": "Animation", "points": [{"text": "Digital ink and paint arrived in 2002.", "sources": [1]}]}]}
    answer, _, step = synthesize(LLM(StepScriptedBackend({"synthesize": report})), "How did it change?", hits)
    assert "1995" not in answer and "2031" not in answer                 # held by no passage: dropped
    assert "in season 3. [2]" in answer and "Digital ink and paint arrived in 2002. [1]" in answer
    assert answer.startswith("The look changed in 2002.")
    invented = {**report, "sections": [report["sections"][0] | {"points": report["sections"][0]["points"][:1]}]}
    answer, _, step = synthesize(LLM(StepScriptedBackend({"synthesize": invented})), "How did it change?", hits)
    assert answer.startswith("No point the model wrote is held by the passages it was shown.")
    assert "title of a.md / - [1]" in answer and any(note.startswith("dropped") for note in step.notes)


def test_the_pipeline_writes_a_sectioned_report(simpsons_kb):
    config, store, _ = simpsons_kb
    config = with_overrides(config, {"pipeline.report_style": "sections", "pipeline.route_check": False,
                                     "pipeline.report_sections": 2, "pipeline.report_shape": "topics",
                                     "pipeline.subquery_focus": 0.0})

    def passage_points(messages):  # one point per passage (the default), its first sentence: each passes the checks
        content = messages[0]["content"]
        texts = [re.match(r".*?[.!?](?=\s)", block, flags=re.DOTALL).group().replace("\n", " ")
                 for block in content.split("<<<DATA\n")[1:]]
        numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", content, flags=re.MULTILINE)]
        return {"heading": "Findings", **{f"passage_{n}": text for n, text in zip(numbers, texts)}}

    backend = StepScriptedBackend({
        "decompose": {"queries": ["animation studios and digital colouring", "voice cast changes"]},
        "route": Seq({"routes": [{"collection": "simpsons_production", "query": "animation studios digital ink"}]},
                     {"routes": [{"collection": "simpsons_characters", "query": "voice cast recasting"}]}),
        "relevance": {"relevant": list(range(1, 30))}, "reflect": {"gaps": []}, "section": passage_points,
        "overview": {"overview": "The show changed."}})
    result = run_pipeline("How have The Simpsons changed over time?", config,
                          llm=LLM(backend, budget=Budget(max_calls=20, max_prompt_tokens=15000)), store=store,
                          embedder=get_embedder(config.embedding))
    assert backend.steps()[-3:] == ["section", "section", "overview"] and "synthesize" not in backend.steps()
    assert result.answer.startswith("The show changed.") and result.answer.count("## ") == 2
    assert "## Findings" not in result.answer            # named nothing its points say: a page title instead
    notes = [n for step in result.trace if step.step == "section" for n in step.notes]
    assert sum(n.startswith("heading 'Findings' replaced by the title of the first point's page") for n in notes) == 2
    assert [s.cited for s in result.sources][:1] == [True] and not result.error


def test_the_sources_list_tells_two_passages_of_one_page_section_apart():
    from helpers.results import Result, number_sources
    origins = [Hit(f"o{i}", "text", 0.5, "simpsons_production", "origins.md", "Origins", "From Shorts", i)
               for i in (1, 2)]
    result = Result("q", "deepsearcher", answer="It began as shorts. [1] [3]")
    result.sources = number_sources([origins[0], hit("a", source="anim.md"), origins[1]], result.answer)
    listing = result.report_markdown().split("## Sources")[1]
    assert "1. Origins — From Shorts (excerpt 1) · `origins.md`" in listing
    assert "3. Origins — From Shorts (excerpt 2) · `origins.md`" in listing
    assert "anim.md" not in listing and "1 more passage(s) found but not cited" in listing  # only cited ones listed


def test_a_section_prompt_shows_each_passage_from_its_first_sentence():
    """Chunks start with their page's title line (for embedding); asked for a sentence from each passage, the
    1.5B model copied those lines, so the section prompt names the page once, in the [n] line."""
    from helpers.knowledge.chunking import header_line
    text = header_line("Ratings and Awards", "The Long Decline") + "Audiences declined gradually over decades."
    ratings = Hit("a", text, 0.5, "c", "ratings.md", "Ratings and Awards", "The Long Decline", 0)
    section = Section("reception", [ratings, hit("b", "Guinness recognised the show.")], [1, 2])
    backend = StepScriptedBackend({"section": {"passage_1": "Audiences declined gradually over decades.",
                                               "passage_2": "Guinness recognised the show.", "heading": "Audiences"}})
    write_section(LLM(backend), "How did it change?", section, per_passage=True)
    prompt = backend.calls_for("section")[0]["messages"][0]["content"]
    assert "[1] Ratings and Awards / The Long Decline\n<<<DATA\nAudiences declined gradually" in prompt
    assert section.heading == "Audiences" and [cited for _, cited in section.points] == [[1], [2]]


def test_a_point_whose_only_sentence_the_cap_ended_keeps_it_to_its_last_clause_break():
    ratings = ("The show was a ratings phenomenon in its first seasons, becoming the first Fox series to finish a "
               "season in the top thirty, and its 1990 episode drew 33.6 million viewers.")
    sections = [Section("reception", [hit("a", ratings), hit("b", "Cast Losses, Retirements and Recasting")], [1, 2])]
    capped = ratings[:140]
    backend = StepScriptedBackend({
        "section": {"passage_1": capped, "passage_2": "Cast Losses, Retirements and Recasting", "heading": "Ratings"},
        "overview": {"overview": "Ratings peaked early."}})
    report, _, steps = write_report(LLM(backend), "How did it change?", sections, per_passage=True, point_chars=140)
    assert "## Ratings\n\nThe show was a ratings phenomenon in its first seasons, becoming the first Fox series to " \
           "finish a season in the top thirty. [1]" in report
    assert steps[0].notes[0].startswith("the 140-character cap ended the only sentence of a point: kept it up to")
    assert steps[0].notes[1].startswith("dropped words that do not end as a sentence: Cast Losses")  # not capped


def test_a_point_the_model_ended_with_an_ellipsis_at_the_cap_is_a_cut_sentence():
    """A fresh-clone demo printed "...Time had included Bart Simpson in its list of the hundred most... [13]":
    the 1.5B model closed its capped sentence with "..." itself."""
    time = ("Time magazine named The Simpsons the best television series of the 20th century in its end-of-century "
            "issue in December 1999, and a year earlier, in 1998, Time had included Bart Simpson in its list of the "
            "hundred most important people of the century.")
    sections = [Section("reception", [hit("a", time), hit("b", "Over time the moral panic faded.")], [1, 2])]
    backend = StepScriptedBackend({
        "section": {"passage_1": time[:217] + "...", "passage_2": "Over time the moral panic faded.",
                    "heading": "Honours"},
        "overview": {"overview": "Honours came early."}})
    report, _, steps = write_report(LLM(backend), "How did it change?", sections, per_passage=True, point_chars=220)
    assert "in its end-of-century issue in December 1999. [1] Over time the moral panic faded. [2]" in report
    assert "..." not in report
    assert split_cut_sentence("It aired in 1990. Time listed the hundred most...") == \
        ("It aired in 1990.", "Time listed the hundred most...")
    assert split_cut_sentence("It moved to the U.S.") == ("It moved to the U.S.", "")


def test_a_cut_sentence_is_closed_before_a_clause_the_cut_left_unfinished():
    """Closing "...in December 1999, and a year earlier, in 1998, Time had" at its last comma kept a
    dangling "and a year earlier, in 1998.": the cut goes where a new clause opens, else at the last break."""
    fragment = ("Time named The Simpsons the best series of the century in December 1999, and a year earlier, "
                "in 1998, Time had")
    assert cut_to_clause(fragment) == "Time named The Simpsons the best series of the century in December 1999."
    listing = "The show won awards for its writing, its music, its voice cast, its animation and its"
    assert cut_to_clause(listing) == "The show won awards for its writing, its music, its voice cast."
    assert cut_to_clause("It aired, and then it") == ""  # too short a head to stand alone


def test_an_overview_that_only_restates_points_is_left_out():
    """The 0.5B model's overview was its one point again: the report then starts with its sections."""
    sections = [Section("records", [hit("a", "Guinness World Records recognised the show in several categories."),
                                    hit("b", "Over time the moral panic faded.")], [1, 2])]
    backend = StepScriptedBackend({
        "section": {"heading": "Records", "points": [
            {"text": "Guinness World Records recognised the show in several categories.", "sources": [1]},
            {"text": "Over time the moral panic faded.", "sources": [2]}]},
        "overview": {"overview": "Guinness World Records recognised the show in several categories."}})
    report, _, steps = write_report(LLM(backend), "How did it change?", sections)
    assert report.startswith("## Records\n\nGuinness World Records recognised")
    assert steps[1].notes[-1] == "no sentence of the overview is left: the report goes without one"
