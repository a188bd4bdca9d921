from __future__ import annotations

from datetime import date

from localmem.util.dates import window

ASKED = "2023-05-30T23:40:00"  # a Tuesday


def test_month_names_resolve_to_the_latest_such_month_not_after_the_question() -> None:
    assert window("Which bike did I service first in February?", ASKED) == (date(2023, 2, 1), date(2023, 2, 28))
    assert window("What did I cook in June?", ASKED) == (date(2022, 6, 1), date(2022, 6, 30))
    assert window("What did I say in May 2021?", ASKED) == (date(2021, 5, 1), date(2021, 5, 31))


def test_past_n_units_end_at_the_question() -> None:
    assert window("the trips I took in the past three months", ASKED) == (date(2023, 2, 26), date(2023, 5, 30))
    assert window("what did I read in the last week", ASKED) == (date(2023, 5, 23), date(2023, 5, 30))


def test_relative_phrases_use_resolve_spans() -> None:
    assert window("What did I do last Saturday?", ASKED) == (date(2023, 5, 27), date(2023, 5, 27))
    assert window("What did I buy two weeks ago?", ASKED) == (date(2023, 5, 15), date(2023, 5, 21))
    assert window("where did I go last month", ASKED) == (date(2023, 4, 1), date(2023, 4, 30))


def test_no_span_without_a_phrase_or_a_date() -> None:
    assert window("How many weeks ago did I meet my aunt?", ASKED) is None
    assert window("Where did I go in May 15?", ASKED) is None  # a day of a month, not the month
    assert window("What did I do last Saturday?", None) is None
    assert window("What did I do last Saturday?", "not a date") is None
