from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from localmem.util.text import count_tokens, fts_query, parse_time, sentence_spans, words_for_tokens


@given(st.text(max_size=400))
def test_sentence_spans_cover_all_text(text: str) -> None:
    spans = sentence_spans(text)
    covered = "".join(text[s:e] for s, e in spans)
    assert "".join(covered.split()) == "".join(text.split())
    assert all(s < e for s, e in spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_sentence_spans_split_sentences() -> None:
    text = "I went hiking yesterday. It was lovely! Did you go too? ok. 3 days.\n\nnew para [image: a dog]"
    parts = [text[s:e] for s, e in sentence_spans(text)]
    assert parts == [
        "I went hiking yesterday.",
        "It was lovely!",
        "Did you go too? ok.",
        "3 days.",
        "new para",
        "[image: a dog]",
    ]


@pytest.mark.parametrize(
    ("raw", "iso"),
    [
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00"),
        ("2023/05/30 (Tue) 23:40", "2023-05-30T23:40:00"),
        ("2023-05-30", "2023-05-30T00:00:00"),
        ("2023-05-30T10:00:00Z", "2023-05-30T10:00:00"),
        ("2023-05-30T12:00:00+02:00", "2023-05-30T10:00:00"),
        (1700000000, "2023-11-14T22:13:20"),
    ],
)
def test_parse_time(raw: str | int, iso: str) -> None:
    assert parse_time(raw) == iso


def test_parse_time_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="unrecognised"):
        parse_time("next tuesday-ish")


@given(st.integers(min_value=0, max_value=10_000))
def test_words_for_tokens_is_the_largest_fitting(tokens: int) -> None:
    w = words_for_tokens(tokens)
    assert count_tokens(" ".join(["x"] * w)) <= tokens
    assert count_tokens(" ".join(["x"] * (w + 1))) > tokens


@given(st.text(max_size=200))
def test_fts_query_quotes_everything(text: str) -> None:
    q = fts_query(text)
    for part in q.split(" OR ") if q else []:
        assert part.startswith('"') and part.endswith('"')
