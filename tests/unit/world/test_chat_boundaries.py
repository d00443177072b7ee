"""The chat cut at its edges (emil.world.chat): UTF-16 units around the BMP's end, a space exactly
at the limit, a space exactly half-way, a character wider than the limit (mutation testing found
these unpinned)."""

from __future__ import annotations

from emil.world.chat import _fit, split_chat, utf16_len


def test_the_last_bmp_character_is_one_unit_and_the_first_astral_one_two() -> None:
    assert utf16_len("\uffff") == 1
    assert utf16_len("\U00010000") == 2
    assert _fit("\uffff" * 4, 4) == 4  # (U+FFFF itself never survives the cleaning: not printable)
    assert split_chat("\U00010000" * 2 + "a", limit=4) == ["\U00010000" * 2, "a"]


def test_a_space_exactly_at_the_limit_is_where_the_cut_goes() -> None:
    assert split_chat("abcd efgh", limit=4) == ["abcd", "efgh"]
    assert split_chat("abc defg hij", limit=8) == ["abc defg", "hij"]  # the next piece starts at a word


def test_a_space_exactly_half_way_is_too_early_to_cut_at() -> None:
    # fit 8, a space at 4 = 8 // 2: the piece is filled instead of cut short
    assert split_chat("abcd efghijkl", limit=8) == ["abcd efg", "hijkl"]
    # fit 9, a space at 4 < 9 / 2 but not < 9 // 3 + 1: still filled (the rule is half, rounded down)
    assert split_chat("abcd efghijklmn", limit=9) == ["abcd efgh", "ijklmn"]
    assert split_chat("abcde fghijklmn", limit=9) == ["abcde", "fghijklmn"]


def test_a_character_wider_than_the_limit_still_makes_a_piece_of_one() -> None:
    assert split_chat("\U0001f600\U0001f600", limit=1) == ["\U0001f600", "\U0001f600"]


def test_the_cut_goes_at_the_last_space_that_fits() -> None:
    # spaces at 7 and 10 within a fit of 12: the later one, not the first past half-way
    assert split_chat("aaaaaaa bb cc dd", limit=12) == ["aaaaaaa bb", "cc dd"]
    # spaces at 5 and 8 within a fit of 8: the one exactly at the limit counts
    assert split_chat("aaaaa bb cc", limit=8) == ["aaaaa bb", "cc"]


def test_at_most_three_pieces_by_default() -> None:
    assert len(split_chat("word " * 400)) == 3
