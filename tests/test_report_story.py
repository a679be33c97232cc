"""The report that tells how something changed: the dated evidence read in code, the sentences a reader
can follow alone, the outline in time order, the sources numbered as cited, and the pipeline choosing it
for a question about change (control flow with a scripted model; the real-model figures are printed by
bench/bench_report.py)."""
from __future__ import annotations

import re

from scripted import Seq, StepScriptedBackend
from test_prompt_reach import passage_points

from helpers.config import with_overrides
from helpers.knowledge.embeddings import get_embedder
from helpers.models.llm import LLM, Budget
from helpers.results import Hit
from helpers.strategies.pipeline import run_pipeline
from helpers.strategies.report_checks import cited_in_order, standalone
from helpers.strategies.report_story import in_time_order, pick_dated, story_outline, write_story
from helpers.strategies.report_writer import Section
from helpers.strategies.timeline import asks_about_change, change_score, dated_excerpt, span
from helpers.values import years_in


def hit(id_: str, text: str, source: str = "", collection: str = "c") -> Hit:
    source = source or f"{id_}.md"
    return Hit(id_, text, 0.5, collection, source, f"title of {source}", "", 0)


def test_years_are_read_from_text_and_counts_are_not_years():
    assert years_in("In the 1990s it drew 33.6 million; 552 episodes and 30,000 dollars by 2009, 1987–1989.") == \
        [1990, 2009, 1987, 1989]
    assert span(["From 1992 until 2016.", "In 1987."]) == (1987, 2016) and span(["no year"]) is None


def test_a_question_about_change_is_told_as_a_story_and_others_are_not():
    for question in ("How have The Simpsons changed over time?", "How did jazz evolve between 1920 and 1960?",
                     "What is the history of the Roman army?", "How has Lisbon grown since 1755?"):
        assert asks_about_change(question), question
    for question in ("Who directed Jaws?", "What is sourdough starter made of?", "Who developed the telephone?"):
        assert not asks_about_change(question), question


def test_a_passage_is_shown_by_the_sentences_that_date_a_change():
    text = ('Apu married Manjula in "The Two Mrs. Nahasapeemapetilons" (1997), and the couple had octuplets. '
            "The family lives in Springfield. Film Roman took over in 1992. The show won an award in 1990.")
    assert dated_excerpt(text) == ('Apu married Manjula in "The Two Mrs. Nahasapeemapetilons" (1997), and the couple '
                                   "had octuplets. Film Roman took over in 1992. The show won an award in 1990.")
    cut = 'Nahasapeemapetilons" (1997), and the couple had octuplets. Maude Flanders was killed in 2000.'
    assert dated_excerpt(cut) == "Maude Flanders was killed in 2000."    # a sentence the chunk boundary cut
    assert dated_excerpt("The family lives in Springfield. Homer works.") == "The family lives in Springfield."
    assert change_score("Film Roman took over in 1992. It won in 1990. Homer works.") == 3  # two dated, one a change


def test_a_sentence_that_leans_on_unseen_text_is_rewritten_or_dropped():
    keep = {"In 2002 the show switched to digital ink and paint.": "",
            "The Scully era brought broader plots in 1997.": "",
            "In the early seasons stars came in disguise; later, whole episodes were built around them.": ""}
    for sentence in keep:
        assert standalone(sentence, "") == (sentence, "")
    assert standalone("Also, Film Roman took over in 1992.", "")[0] == "Film Roman took over in 1992."
    assert standalone("Later, episodes were built around guests.", "")[0] == "Episodes were built around guests."
    assert standalone("FXX also showed every episode in 2014.", "")[0] == "FXX showed every episode in 2014."
    for sentence in ("Simpsons World and FXX also exposed a problem that would return later.",  # copied from a passage
                     "Over time the moral panic faded.",                      # a panic the report never named
                     "This change is described in the production collection.",
                     "His seasons continued the anthology tradition in 1999.",
                     "These changes made the show popular in 2003.",
                     "The episode was divisive when it first aired.",
                     'the Monorail" and "Last Exit to Springfield" (season 4).'):
        text, note = standalone(sentence, "The show moved to high definition.")
        assert text == "" and note.startswith("dropped a sentence that leans on text the reader never saw"), sentence
    assert standalone("These changes made the show popular in 2003.", "The animation changed in 2002.")[0]


def test_sources_are_numbered_as_first_cited_and_only_cited_ones_are_kept():
    passages = [hit("a", "x"), hit("b", "y"), hit("c", "z"), hit("d", "w")]
    answer, used = cited_in_order("One [3]. Two [1][3]. Three [2] and [9].", passages)
    assert answer == "One [1]. Two [2][1]. Three [3] and [9]." and [h.id for h in used] == ["c", "a", "b"]


def test_the_outline_takes_dated_passages_page_by_page_and_tells_them_in_time_order():
    hits = [hit("s1", "The show is a family sitcom.", "summary.md"),                  # dates nothing
            hit("a1", "Film Roman took over in 1992. Digital ink came in 2002.", "anim.md"),
            hit("a2", "High definition arrived in 2009.", "anim.md"),
            hit("o1", "The shorts began in 1987 and became a series in 1989.", "origins.md"),
            hit("r1", "Ratings fell in the 2000s.", "ratings.md")]
    chosen = pick_dated(hits, 3)
    assert [h.id for h in chosen] == ["o1", "a1", "r1"]                 # one per page, then in time order
    assert [h.id for h in pick_dated(hits[:3], 3)] == ["a1", "a2", "s1"]  # undated only to reach three
    sections = story_outline([("question", hits)], skip={"r1"}, max_sections=4, per_section=3)
    assert [[h.id for h in s.hits] for s in sections] == [["o1", "a1", "a2"]] and sections[0].numbers == [1, 2, 3]


def test_a_collection_that_dates_more_changes_than_a_section_shows_is_split_by_era():
    early = [hit(f"e{i}", f"The studio changed in {1990 + i}.", f"early{i}.md", "prod") for i in range(3)]
    late = [hit(f"l{i}", f"The studio moved in {2010 + i}.", f"late{i}.md", "prod") for i in range(3)]
    other = [hit("x1", "Ratings fell in 2001.", "r.md", "rec"), hit("x2", "Ratings rose in 1990.", "r2.md", "rec")]
    sections = story_outline([("question", late + early + other)], set(), max_sections=3, per_section=3)
    assert [[h.id for h in s.hits] for s in sections] == [["e0", "e1", "e2"], ["l0", "l1", "l2"], ["x2", "x1"]]


def test_sentences_are_sorted_by_their_years_and_an_undated_one_stays_after_its_neighbour():
    section = Section("t", [hit("a", "In 1992 and 2016."), hit("b", "In 1989.")], [1, 2])
    section.points = [("Film Roman came in 1992. It stayed long.", [1]), ("The series began in 1989.", [2])]
    in_time_order(section)
    assert section.points == [("The series began in 1989.", [2]), ("Film Roman came in 1992.", [1]),
                              ("It stayed long.", [1])]


def story_script(plan_title: str = "How the show changed") -> dict:
    def plan(messages):
        keys = re.findall(r'"(theme_\d+)"', messages[-1]["content"])
        return {"title": plan_title, **dict(zip(keys, ["Production", "Reception", "Cast"]))}

    return {"story plan": plan, "section": lambda messages: {
                key: sentence for key, sentence in zip(
                    dict.fromkeys(re.findall(r'"(passage_\d+)": "', messages[-1]["content"])),
                    ["Also, the show moved to digital ink in 2002.", "The show began as shorts in 1987.",
                     "Over time the moral panic faded."])},
            "conclusion": {"conclusion": "At first the show was short cartoons; by 2002 it was drawn digitally."}}


def test_the_story_has_a_plan_sections_in_time_order_a_conclusion_and_a_title_with_its_years():
    sections = [Section("prod", [hit("a", "The show moved to digital ink in 2002."),
                                 hit("b", "The show began as shorts in 1987."),
                                 hit("c", "Over time the moral panic faded.")], [1, 2, 3]),
                Section("rec", [hit("d", "The show moved to digital ink in 2002 again."),
                                hit("e", "The show began as shorts in 1987 on Fox.")], [4, 5])]
    backend = StepScriptedBackend(story_script())
    title, answer, used, steps = write_story(LLM(backend), "How did the show change?", sections)
    assert title == "How the show changed (1987–2002)"
    assert answer == ("## Production\n\nThe show began as shorts in 1987. [1] The show moved to digital ink in 2002. [2]\n\n"
                      "## Conclusion\n\nAt first the show was short cartoons; by 2002 it was drawn digitally.")
    assert [h.id for h in used] == ["b", "a"]                             # numbered as first cited, no gap
    assert [s.step for s in steps] == ["story plan", "section", "section", "conclusion"]
    notes = [n for s in steps for n in s.notes]
    assert any("removed 'Also'" in n for n in notes) and any("'the moral panic'" in n for n in notes)
    assert sum("repeats an earlier one" in n for n in notes) == 2          # the second theme said it again
    assert "passage_1" in backend.calls_for("section")[0]["messages"][0]["content"]
    assert "title of a.md" not in backend.calls_for("section")[0]["messages"][0]["content"]  # no header to copy


def test_a_heading_that_is_a_sentence_or_a_repeat_gives_way_to_its_pages_title():
    sections = [Section("p", [hit("a", "It moved in 2002.", "x.md"), hit("b", "It began in 1987.", "x.md")], [1, 2]),
                Section("q", [hit("c", "It fell in 2010.", "y.md"), hit("d", "It rose in 1990.", "y.md")], [3, 4])]
    script = story_script()
    script["story plan"] = {"theme_1": "The show moved to digital ink in 2002.", "theme_2": "Ratings",
                            "title": "x"}
    script["section"] = Seq({"passage_1": "It moved in 2002.", "passage_2": "It began in 1987."},
                            {"passage_3": "It fell in 2010.", "passage_4": "It rose in 1990."})
    _, answer, _, steps = write_story(LLM(StepScriptedBackend(script)), "How did it change?", sections)
    assert answer.startswith("## title of x.md\n\n") and "## Ratings\n\n" in answer
    assert steps[0].notes == ["heading 'The show moved to digital ink in 2002.' replaced by 'title of x.md' "
                              "(it ends as a sentence)"]


def test_the_pipeline_tells_a_question_about_change_as_a_story(simpsons_kb):
    config, store, _ = simpsons_kb
    config = with_overrides(config, {"pipeline.route_check": False, "pipeline.report_sections": 3,
                                     "pipeline.subquery_focus": 0.0, "pipeline.max_iter": 1})
    backend = StepScriptedBackend({
        "decompose": {"queries": ["animation studios and digital colouring"]},
        "route": {"routes": [{"collection": "simpsons_production", "query": "animation studios digital ink"}]},
        "relevance": {"relevant": list(range(1, 30))}, "reflect": {"gaps": []},
        **story_script(), "section": passage_points})  # each passage's first sentence: held by it
    result = run_pipeline("How have The Simpsons changed over time?", config,
                          llm=LLM(backend, budget=Budget(max_calls=20, max_prompt_tokens=15000)), store=store,
                          embedder=get_embedder(config.embedding))
    steps = [s.step for s in result.trace]
    assert "timeline" in steps and steps[-1] == "conclusion" and "overview" not in steps
    timeline = result.steps("timeline")[0]
    assert timeline.parsed and all(re.match(r"\d{4} · ", line) for line in timeline.parsed)
    assert result.title.startswith("How the show changed (") and result.report_markdown().startswith("# How the show")
    cited = [s.number for s in result.sources if s.cited]
    assert cited == list(range(1, len(cited) + 1)) and "(not cited)" not in result.report_markdown()
    topics = run_pipeline("What does The Simpsons' production involve?", config, store=store,
                          llm=LLM(StepScriptedBackend({**backend.script, "section": passage_points}, fill=True)),
                          embedder=get_embedder(config.embedding))
    assert not topics.steps("timeline") and not topics.title               # any other question: by topic
