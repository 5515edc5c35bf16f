"""The Spark job's argument checks, which run on the driver before Spark starts (exit code 2, a message naming
what is wrong)."""

from __future__ import annotations

import json

import latest_checkpoints as job
import pytest


def run_main(capsys, topics: list[str], ends: dict) -> tuple[int, str]:
    argv = ["--bootstrap-servers", "127.0.0.1:1", "--end-offsets", json.dumps(ends), "--output", "/nonexistent/out"]
    for t in topics:
        argv += ["--checkpoints-topic", t]
    rc = job.main(argv)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("topics, ends, says", [
    (["a.checkpoints.internal"], {"b.checkpoints.internal": {"0": 5}},
     "missing ['a.checkpoints.internal'], unexpected ['b.checkpoints.internal']"),
    (["a.checkpoints.internal", "a_checkpoints_internal"],
     {"a.checkpoints.internal": {"0": 5}, "a_checkpoints_internal": {"0": 5}},
     "several checkpoints topics name the same source alias: {'a': ['a.checkpoints.internal', 'a_checkpoints_internal']}"),
    (["a.checkpoints.internal"], {"a.checkpoints.internal": {"16384": 5}}, "partition 16384 end offset 5"),
    (["a.checkpoints.internal"], {"a.checkpoints.internal": {"0": 2**47}}, f"partition 0 end offset {2**47}"),
    (["a.checkpoints.internal"], {"a.checkpoints.internal": [5]}, "must be a JSON object"),
])
def test_bad_arguments_exit_2_and_say_what_is_wrong(capsys, topics, ends, says):
    rc, err = run_main(capsys, topics, ends)
    assert rc == job.EXIT_BAD_ARGS
    assert "latest_checkpoints: bad arguments:" in err and says in err


def test_the_same_topic_twice_is_one_topic():
    job.check_topics(list(dict.fromkeys(["a.checkpoints.internal"] * 2)), {"a.checkpoints.internal": {"0": 5}})
