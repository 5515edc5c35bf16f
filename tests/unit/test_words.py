from mm2_failover.rules.words import listed


def test_a_long_list_is_cut_and_says_how_many_more():
    assert listed(["a", "b"]) == "a, b"
    assert listed([f"g{i}" for i in range(23)]) == ", ".join(f"g{i}" for i in range(20)) + " (+3 more)"
    assert listed((x for x in "abcdef"), limit=5, sep="; ") == "a; b; c; d; e (+1 more)"
    assert listed([]) == ""


def test_a_duration_is_said_one_way_everywhere():
    from mm2_failover.rules.words import duration

    assert [duration(s) for s in (0, 30, 59.6, 95, 3540, 3600, 7300, -4)] == [
        "0 s",
        "30 s",
        "1 min",
        "1 min 35 s",
        "59 min",
        "1 h",
        "2 h 1 min",
        "0 s",
    ]
    assert duration(float("nan")) == duration(float("inf")) == "unknown"
