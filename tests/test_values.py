"""Dates and numbers read as values (``helpers.values``): precision, era, ranges, order and ages."""
from __future__ import annotations

import pytest

from helpers.values import Date, age_at, extreme, order, parse_date, parse_number, years_between


@pytest.mark.parametrize("text, date", [
    ("20 March 851", Date(851, 3, 20)), ("December 8, 1982", Date(1982, 12, 8)), ("1954-01-11", Date(1954, 1, 11)),
    ("1960-02-2", Date(1960, 2, 2)), ("c. 470 BC", Date(-470)), ("384 BC", Date(-384)), ("AD 5", Date(5)),
    ("1901–1985", Date(1901)), ("August 1960", Date(1960, 8)), ("born 12 May 1920 in Oslo", Date(1920, 5, 12)),
    ("in the 1980s", None), ("Detroit", None), ("", None)])
def test_dates_are_read_with_their_precision_era_and_range(text, date):
    assert parse_date(text) == date


def test_dates_order_by_day_and_era_and_say_when_their_precision_cannot_tell():
    assert order(parse_date("1954-01-11"), parse_date("12 January 1954")) == -1   # a day apart: no tie
    assert order(parse_date("470 BC"), parse_date("384 BC")) == -1               # before Aristotle's birth
    assert order(Date(1950), Date(1950, 6, 1)) is None and order(Date(1950, 6), Date(1950, 6, 2)) is None
    assert extreme([Date(-384), Date(-470), Date(1900, 5, 1)], earliest=True) == 1    # any number of dates
    assert extreme([Date(1950), Date(1950, 3, 1)], earliest=True) is None             # cannot tell: no guess


def test_ages_and_years_are_computed_in_whole_years():
    assert age_at(Date(1988, 4, 14), Date(2012, 4, 13)) == 23 and age_at(Date(1988, 4, 13), Date(2012, 4, 13)) == 24
    assert age_at(Date(1900), Date(1950, 3, 1)) == 50 and age_at(Date(2000), Date(1990)) is None
    assert years_between(Date(-5), Date(5)) == 9                                 # no year 0
    assert parse_number("population was 1,234 in 2006") == 1234 and parse_number("2.5 million") == 2.5e6
    assert parse_number("Leeds") is None
