from mm2_failover import steps

BACKUP = {"taken_at": "t", "groups": {"a": {"t": {"0": 5, "1": None}}, "b": {"t": {"0": None}}}}


def test_restores_offsets_and_removes_commits_that_did_not_exist():
    diff = steps.rollback_diff(BACKUP, {"a": {("t", 0): 9, ("t", 1): 3}, "b": {("t", 0): 4}})
    assert diff == {"a": ({("t", 0): 5}, [("t", 1)]), "b": ({}, [("t", 0)])}


def test_nothing_to_do_when_the_target_already_holds_the_backup():
    assert steps.rollback_diff(BACKUP, {"a": {("t", 0): 5}}) == {}


def test_commits_outside_the_backup_are_not_touched():
    assert steps.rollback_diff(BACKUP, {"a": {("t", 0): 5, ("other", 0): 1}}) == {}


def test_json_round_trip_of_offset_maps():
    m = {("t", 0): 1, ("t", 10): 2, ("u", 3): 4}
    assert steps.tp_map_from_json(steps.tp_map_to_json(m)) == m
