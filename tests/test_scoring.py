"""Answer scores as the field computes them (EM, token F1, standard normalisation), the lenient
containment beside them, and the tidying every strategy's short answer goes through."""
from __future__ import annotations

import pytest

from helpers.answer_text import (answer_choices, is_yes_no_question, names_one_of, normalise, only_a_date,
                                 question_options, wants_earlier)
from helpers.evaluation.harness import EvalQuestion, score
from helpers.evaluation.scoring import contains_answer, exact_match, score_answer, token_f1
from helpers.evaluation.summary import row_scores, summarise
from helpers.strategies.answer import option_by_dates, tidy_answer
from helpers.strategies.reports import answer_schema

COMPARISON = "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?"


def test_normalisation_drops_case_punctuation_articles_and_spaces():
    assert normalise("  The  Mask of Fu-Manchu! ") == "mask of fumanchu"
    assert normalise("An Apple, a pear.") == "apple pear"


@pytest.mark.parametrize("answer, gold, em, f1", [
    ("The Mask Of Fu Manchu", "The Mask Of Fu Manchu", 1.0, 1.0),
    ("the mask of fu manchu.", "The Mask Of Fu Manchu", 1.0, 1.0),        # case, article, full stop
    ("Film Roman [2]", "Film Roman", 0.0, 0.8),                             # a citation mark is a token
    ("Liévin, Pas-de-Calais", "Liévin", 0.0, 0.6667),                      # more than the answer: F1 only
    ("June 5, 1923", "5 June 1923", 0.0, 1.0),                              # same words, other order
    ("1923", "5 June 1923", 0.0, 0.5),                                      # a date written shorter
    ("no", "no", 1.0, 1.0),
    ("no, never", "no", 0.0, 0.0),                                          # yes/no: all or nothing
    ("yes", "no", 0.0, 0.0),
    ("Blind Shaft or The Mask Of Fu Manchu", "The Mask Of Fu Manchu", 0.0, 0.7273),
])
def test_exact_match_and_token_f1(answer, gold, em, f1):
    assert exact_match(answer, gold) == em
    assert token_f1(answer, gold) == pytest.approx(f1, abs=1e-4)


def test_the_best_of_gold_and_aliases_counts():
    scored = score_answer("Bart", ["Bartholomew Simpson", "Bart"])
    assert (scored.em, scored.f1) == (1.0, 1.0)
    q = EvalQuestion("1", "Who is Homer's son?", "Bartholomew Simpson", aliases=["Bart Simpson"])
    assert score("bart simpson", q).em == 1.0 and score("Lisa", q).f1 == 0.0


def test_containment_gives_no_credit_to_an_answer_that_names_both_options():
    assert question_options(COMPARISON) == ["Blind Shaft", "The Mask Of Fu Manchu"]
    assert question_options("Who is the mother of X?") == []
    both = "Blind Shaft came out after The Mask Of Fu Manchu"
    assert not contains_answer(both, ["The Mask Of Fu Manchu"], COMPARISON)
    assert contains_answer("The Mask Of Fu Manchu, in 1932", ["The Mask Of Fu Manchu"], COMPARISON)
    assert not contains_answer("not found", ["no"]) and contains_answer("No, they are not.", ["no"])
    assert contains_answer("The budget is not stated.", [], answerable=False)


def test_rows_saved_before_em_was_recorded_are_rescored_and_summarised_per_type():
    old = {"strategy": "naive", "id": "1", "type": "comparison", "question": COMPARISON, "failed": False,
           "answer": "The Mask Of Fu Manchu.", "gold_answer": "The Mask Of Fu Manchu", "calls": 1,
           "prompt_tokens": 10, "completion_tokens": 2, "seconds": 1.0, "recall@2": 1.0}
    new = {**old, "id": "2", "type": "compositional", "answer": "Paris", "gold_answer": "Lyon",
           "em": 0.0, "f1": 0.0, "contains": False}
    assert row_scores(old) == {"em": 1.0, "f1": 1.0, "contains": True}
    entry = summarise([old, new], ["naive"], [2])["naive"]
    assert (entry["em"], entry["f1"], entry["contains"]) == (0.5, 0.5, 0.5)
    assert entry["by_type"]["comparison"]["em"] == 1.0 and entry["by_type"]["compositional"]["em"] == 0.0


@pytest.mark.parametrize("answer, question, tidied", [
    ("The Mask of Fu Manchu [2].", COMPARISON, "The Mask Of Fu Manchu"),       # the option as the question writes it
    ("Blind Shaft was released in 2003", COMPARISON, "Blind Shaft"),
    ("Blind Shaft, then The Mask Of Fu Manchu", COMPARISON, "Blind Shaft, then The Mask Of Fu Manchu"),  # both: kept
    ("Yes, both are American.", "Are both films from the same country?", "yes"),
    ("No [1][3]", "Did the two directors share a nationality?", "no"),
    ('"20 March 851".', "When did Lothair II's mother die?", "20 March 851"),
    ("Yesterday's Enterprise", "Which episode came first?", "Yesterday's Enterprise"),
    ("Yes.", "Why did Katherine Mansfield die?", "not found"),               # asks neither yes nor no
])
def test_tidy_answer(answer, question, tidied):
    assert tidy_answer(answer, question) == tidied


def test_yes_no_questions_are_told_from_option_questions():
    assert is_yes_no_question("Are Alpha and Beta from the same country?")
    assert not is_yes_no_question("Was Alpha born first, Bob or Carl?")
    assert not is_yes_no_question("Was Ann Lee or Bob Roe born first?")
    assert not is_yes_no_question("Who was born first?")


@pytest.mark.parametrize("question, options", [
    ("Which film came out first, Blind Shaft or The Mask Of Fu Manchu?", ["Blind Shaft", "The Mask Of Fu Manchu"]),
    ("Who lived longer, Sir Thomas Wheate, 1St Baronet or Ann Lee?", ["Sir Thomas Wheate, 1St Baronet", "Ann Lee"]),
    ("Which film has the director who died later, Love, Honor And Oh-Baby! or I Cover The Underworld?",
     ["Love, Honor And Oh-Baby!", "I Cover The Underworld"]),
    ("Was Ann Lee or Ludwig van Beethoven born first?", ["Ann Lee", "Ludwig van Beethoven"]),
    ("Who was born first out of Ann Lee and Bob Roe?", ["Ann Lee", "Bob Roe"]),
    ("When did John V, Prince Of Anhalt-Zerbst's father die?", []),
    ("Where did the director of film Ann and Bob die?", []),
    ("Did the war between France and Spain end in 1659?", []),
    ("What is the distance between Paris and Rome?", []),                         # no choice asked
    ("How many years passed between the births of Mozart and Beethoven?", []),
    ("Which is longest: the Nile, the Amazon or the Yangtze?", ["Nile", "Amazon", "Yangtze"]),
    ("Which came first: Alpha, Beta, or Gamma Ray?", ["Alpha", "Beta", "Gamma Ray"]),
    ("Is the director of Jaws American or British?", ["American", "British"]),
    ("Who was born later, the composer Ann Lee or the conductor Bo Roe?", ["Ann Lee", "Bo Roe"]),
])
def test_the_options_a_question_offers(question, options):
    """The one-call strategies' reading of options (the chain's plan carries its own)."""
    assert question_options(question) == options


def test_the_choices_an_answer_is_constrained_to():
    assert answer_choices("Are Alpha and Beta from the same country?") == ["yes", "no"]
    assert answer_choices("Was Ann Lee or Bob Roe born first?") == ["Ann Lee", "Bob Roe"]
    assert answer_choices("Who is the mother of the director of film Alpha?") == []
    schema = answer_schema(3, answer_choices("Was Ann Lee or Bob Roe born first?")).model_json_schema()
    assert schema["properties"]["answer"]["enum"] == ["Ann Lee", "Bob Roe"]
    assert "enum" not in answer_schema(3).model_json_schema()["properties"]["answer"]


def test_an_option_question_answered_with_a_related_name_gets_the_option_the_facts_tie_it_to():
    question = "Which film has the director who died first, The Goose Woman or Silent Hours?"
    facts = "The Goose Woman was directed by Clarence Brown [1]. Silent Hours was directed by Ann Vos [2]."
    assert tidy_answer("Clarence Brown", question, facts) == "The Goose Woman"
    assert tidy_answer("Clarence Brown", question) == "Clarence Brown"            # no facts: kept
    both = "The Goose Woman and Silent Hours were both directed by Clarence Brown [1]."
    assert tidy_answer("Clarence Brown", question, both) == "Clarence Brown"      # both tied to it: kept


def test_a_comparison_of_dates_says_which_way_and_refuses_a_tie():
    assert wants_earlier("Who was born first, A or B?") and wants_earlier("Which film is older, A or B?")
    assert wants_earlier("Which film came out later, A or B?") is False
    assert wants_earlier("Are A and B from the same country?") is None


def test_an_answer_names_a_person_when_it_holds_all_of_the_name():
    assert names_one_of("Anna Lisbeth Christina Palme", ["Lisbeth Palme"])       # the subject, in full
    assert names_one_of("Godomar II", ["Godomar Ii"])
    assert not names_one_of("Louis XV", ["Louis, Dauphin Of France (Son Of Louis Xv)"])  # his father
    assert not names_one_of("Ruaidhrí Mac Ruaidhrí", ["Raghnall Mac Ruaidhrí"])           # another person
    assert not names_one_of("", ["Ann"]) and not names_one_of("Ann", [""])
    assert names_one_of("Abu Ishaq Muhammad", ["Abū Isḥāq Muḥammad"])                  # accents aside
    assert not names_one_of("Louise", ["Louis"])                                       # another person


def test_a_date_alone_is_told_from_a_name_with_a_date():
    assert only_a_date("born December 19, 1993") and only_a_date("1938") and only_a_date("c. 870")
    assert not only_a_date("Detroit, 1970") and not only_a_date("Detroit") and not only_a_date("19th century")


def test_the_dates_the_facts_give_each_option_decide_which_came_first():
    question = "Who was born first out of Aivar Kuusmaa and Andy Summers?"
    facts = "Aivar Kuusmaa was born on 12 June 1967, and Andy Summers was born on 31 December 1942. [3][4]"
    assert option_by_dates(question, facts) == "Andy Summers"
    assert option_by_dates("Who was born later out of Aivar Kuusmaa and Andy Summers?", facts) == "Aivar Kuusmaa"
    assert option_by_dates("Which film came out first, 1917 or Dying God?",
                           "1917 was released in 2019 [1], while Dying God came out in 2008 [2].") == "Dying God"
    assert option_by_dates(question, "Aivar Kuusmaa was born on 12 June 1967 [3].") is None          # one side only
    assert option_by_dates(question, "Aivar Kuusmaa and Andy Summers were born in 1967 and 1942.") is None  # whose?
    assert option_by_dates("Are Aivar Kuusmaa and Andy Summers both from Estonia?", facts) is None   # yes/no
    assert option_by_dates("Which film is longer, Dying God or 3 Dots?", "Dying God: 2008; 3 Dots: 2010") is None
    assert option_by_dates("Who was born first, Socrates or Aristotle?",
                           "Socrates was born in 470 BC; Aristotle was born in 384 BC.") == "Socrates"  # the era
    assert option_by_dates("Who died first, Ann Lee or Bo Roe?",
                           "Ann Lee died on 1954-01-12; Bo Roe died on 11 January 1954.") == "Bo Roe"  # a day apart
