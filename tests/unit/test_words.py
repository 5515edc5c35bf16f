from mm2_failover.words import listed


def test_a_long_list_is_cut_and_says_how_many_more():
    assert listed(["a", "b"]) == "a, b"
    assert listed([f"g{i}" for i in range(23)]) == ", ".join(f"g{i}" for i in range(20)) + " (+3 more)"
    assert listed((x for x in "abcdef"), limit=5, sep="; ") == "a; b; c; d; e (+1 more)"
    assert listed([]) == ""
