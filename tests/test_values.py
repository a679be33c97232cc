"""Dates read as values (``helpers.values``): precision, era, ranges and order."""
from __future__ import annotations

import pytest

from helpers.values import Date, extreme, order, parse_date


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
