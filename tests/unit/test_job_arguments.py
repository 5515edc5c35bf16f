"""The Spark job's argument checks, which run on the driver before Spark starts (exit code 2, a message naming
what is wrong; exit 4 when the cluster does not answer). The checks against a real broker (partitions that do not
exist, offsets outside the log, records deleted since the snapshot) are in tests/integration/test_latest_checkpoints_job.py."""

from __future__ import annotations

import json

import pytest

from mm2_failover.jobs.checkpoint_pass import driver, job_args


def run_main(capsys, topics: list[str], ends, extra: list[str] | None = None) -> tuple[int, str]:
    argv = [
        "--bootstrap-servers",
        "127.0.0.1:1",
        "--end-offsets",
        json.dumps(ends),
        "--output",
        "/nonexistent/out",
        "--timeout",
        "2",
        *(extra or []),
    ]
    for t in topics:
        argv += ["--checkpoints-topic", t]
    rc = driver.main(argv)
    return rc, capsys.readouterr().err


A = "a=a.checkpoints.internal"


@pytest.mark.parametrize(
    "topics, ends, says",
    [
        (
            [A],
            {"b.checkpoints.internal": {"0": 5}},
            "missing ['a.checkpoints.internal'], unexpected ['b.checkpoints.internal']",
        ),
        (["a.checkpoints.internal"], {"a.checkpoints.internal": {"0": 5}}, "expected ALIAS=TOPIC"),
        (
            [A, "a=a_checkpoints_internal"],
            {"a.checkpoints.internal": {"0": 5}, "a_checkpoints_internal": {"0": 5}},
            "several checkpoints topics for source alias 'a'",
        ),
        ([A, "b=a.checkpoints.internal"], {"a.checkpoints.internal": {"0": 5}}, "given for several aliases"),
        ([A], {"a.checkpoints.internal": {"16384": 5}}, "partition 16384 end offset 5"),
        ([A], {"a.checkpoints.internal": {"0": 2**47}}, f"partition 0 end offset {2**47}"),
        ([A], {"a.checkpoints.internal": [5]}, "must be a JSON object"),
        ([A], {"a.checkpoints.internal": {"0": -1}}, "partition 0: offset -1 is not an offset"),
        ([A], {"a.checkpoints.internal": {"0": None}}, "partition 0: offset None is not an offset"),
        ([A], {"a.checkpoints.internal": {"0": "12"}}, "partition 0: offset '12' is not an offset"),
        ([A], {"a.checkpoints.internal": {"x": 12}}, "partition 'x' is not a partition number"),
    ],
)
def test_bad_arguments_exit_2_and_say_what_is_wrong(capsys, topics, ends, says):
    rc, err = run_main(capsys, topics, ends)
    assert rc == driver.EXIT_BAD_ARGS, err
    assert "latest_checkpoints: bad arguments:" in err and says in err


def test_start_after_end_is_refused(capsys):
    rc, err = run_main(
        capsys,
        [A],
        {"a.checkpoints.internal": {"0": 5}},
        ["--start-offsets", json.dumps({"a.checkpoints.internal": {"0": 9}})],
    )
    assert rc == driver.EXIT_BAD_ARGS and "start offset 9 is after the end offset 5" in err


def test_the_states_url_is_read_only_beside_its_folder(capsys):
    rc, err = run_main(capsys, [A], {"a.checkpoints.internal": {"0": 5}}, ["--state-url", "s3a://b/latest-state"])
    assert rc == driver.EXIT_BAD_ARGS and "--state-url is read with --state-dir" in err, err


def test_unreachable_cluster_fails_fast_with_exit_4(capsys):
    rc, err = run_main(capsys, [A], {"a.checkpoints.internal": {"0": 5}})
    assert rc == driver.EXIT_UNREACHABLE, err
    assert "127.0.0.1:1" in err and "reach" in err


def test_the_same_alias_and_topic_twice_is_one():
    assert job_args.topics_by_alias([A, A]) == {"a": "a.checkpoints.internal"}


def test_options_file_feeds_both_clients_and_the_environment_stays_a_fallback(tmp_path, monkeypatch):
    f = tmp_path / "opts.json"
    f.write_text(
        json.dumps(
            {"java": {"sasl.jaas.config": "x", "security.protocol": "SASL_SSL"}, "librdkafka": {"sasl.password": "y"}}
        )
    )
    monkeypatch.setenv(job_args.OPTIONS_ENV, json.dumps({"client.id": "c"}))
    args = job_args.parse_args(
        [
            "--bootstrap-servers",
            "h:1",
            "--checkpoints-topic",
            A,
            "--end-offsets",
            "{}",
            "--output",
            "o",
            "--kafka-options-file",
            str(f),
        ]
    )
    java, rdk = job_args.kafka_options(args)
    assert java == {
        "client.id": "c",
        "sasl.jaas.config": "x",
        "security.protocol": "SASL_SSL",
        "bootstrap.servers": "h:1",
    }
    assert rdk == {"sasl.password": "y", "bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}
