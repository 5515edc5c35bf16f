"""How the latest-checkpoints job's answers reach a run folder in an object store (``config.spark_io``), the S3A
settings it is given (``config.s3a_settings``), and where they go: the job's private options file, never a command
line. The job's writes through S3A on a real S3 server: tests/integration/test_object_store.py."""

from __future__ import annotations

import json
import stat

import pytest

from mm2_failover.adapters.config import s3a_settings, s3a_url, spark_io, spark_jars

STORE = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-secret",
    "AWS_DEFAULT_REGION": "eu-west-1",
}


@pytest.mark.parametrize(
    "art, io",
    [
        ("", "stage"),
        ("/srv/artifacts", "stage"),
        ("file:///srv/a", "stage"),
        ("s3://bucket/prefix", "s3a"),
        ("gs://bucket/prefix", "stage"),
    ],
)
def test_s3_artifacts_are_written_through_s3a_by_default_anything_else_is_staged(art, io):
    assert spark_io({"MM2_FAILOVER_ARTIFACTS": art}) == io


def test_staging_can_be_chosen_for_s3_and_s3a_is_refused_where_it_cannot_write():
    assert spark_io({"MM2_FAILOVER_ARTIFACTS": "s3://b/p", "MM2_FAILOVER_SPARK_IO": "stage"}) == "stage"
    with pytest.raises(ValueError, match=r"MM2_FAILOVER_SPARK_IO=s3a, but MM2_FAILOVER_ARTIFACTS is gs://b/p"):
        spark_io({"MM2_FAILOVER_ARTIFACTS": "gs://b/p", "MM2_FAILOVER_SPARK_IO": "s3a"})
    with pytest.raises(
        ValueError, match=r"\[mm2_failover\] artifacts is a local folder"
    ):  # not set: named as it is now
        spark_io({"MM2_FAILOVER_SPARK_IO": "s3a"})
    with pytest.raises(ValueError, match=r"MM2_FAILOVER_SPARK_IO='direct': use one of stage, s3a"):
        spark_io({"MM2_FAILOVER_ARTIFACTS": "s3://b/p", "MM2_FAILOVER_SPARK_IO": "direct"})


def test_s3a_settings_come_from_the_standard_aws_variables():
    assert s3a_settings(STORE) == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.access.key": "AKIDEXAMPLE",
        "fs.s3a.secret.key": "wJalrXUtnFEMI-secret",
    }
    # an S3-only endpoint wins over the general one; a session token needs S3A's temporary-credentials provider
    got = s3a_settings({**STORE, "AWS_ENDPOINT_URL_S3": "https://s3.example", "AWS_SESSION_TOKEN": "tok"})
    assert got["fs.s3a.endpoint"] == "https://s3.example" and got["fs.s3a.session.token"] == "tok"
    assert got["fs.s3a.aws.credentials.provider"] == "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    # no keys, no endpoint (AWS itself, an instance profile): nothing but the region; S3A's own chain decides
    assert s3a_settings({"AWS_REGION": "us-east-2"}) == {"fs.s3a.endpoint.region": "us-east-2"}
    assert s3a_url("s3://bucket/a/b.parquet") == "s3a://bucket/a/b.parquet"


def test_the_s3a_settings_go_only_into_the_private_options_file():
    from mm2_failover.adapters.spark import submission_of, write_options_file

    f = write_options_file({"bootstrap.servers": "b:9092"}, "run-key", s3a_settings(STORE))
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert json.loads(f.read_text())["hadoop"]["fs.s3a.secret.key"] == STORE["AWS_SECRET_ACCESS_KEY"]
    sub = submission_of(["--kafka-options-file", str(f)], f)
    seen = json.dumps([sub.args, sub.env, sub.conf])
    assert STORE["AWS_SECRET_ACCESS_KEY"] not in seen and STORE["AWS_ACCESS_KEY_ID"] not in seen
    # the job reads them from there (and sets them on its session)
    from mm2_failover.jobs.checkpoint_pass.job_args import session_settings

    assert session_settings(type("A", (), {"kafka_options_file": str(f)})())["fs.s3a.access.key"] == "AKIDEXAMPLE"
    g = write_options_file({"bootstrap.servers": "b"}, "k2")
    assert json.loads(g.read_text()).get("hadoop") is None
    f.unlink(), g.unlink()


def test_the_s3a_jars_are_added_only_when_the_job_writes_through_s3a(tmp_path, monkeypatch):
    kafka, s3a = tmp_path / "kafka", tmp_path / "s3a"
    kafka.mkdir(), s3a.mkdir()
    (kafka / "spark-sql-kafka.jar").write_bytes(b"")
    monkeypatch.setenv("MM2_FAILOVER_SPARK_JARS", str(kafka))
    monkeypatch.setenv("MM2_FAILOVER_S3A_JARS", str(s3a))
    monkeypatch.delenv("MM2_FAILOVER_SPARK_IO", raising=False)
    monkeypatch.setenv("MM2_FAILOVER_ARTIFACTS", "s3://b/p")
    with pytest.raises(FileNotFoundError, match=r"S3A's jars .* not found in .*s3a.*run scripts/fetch_jars.sh"):
        spark_jars()
    (s3a / "hadoop-aws-3.5.0.jar").write_bytes(b"")
    assert [j.rsplit("/", 1)[1] for j in spark_jars()] == ["spark-sql-kafka.jar", "hadoop-aws-3.5.0.jar"]
    monkeypatch.setenv("MM2_FAILOVER_ARTIFACTS", str(tmp_path / "local"))
    assert [j.rsplit("/", 1)[1] for j in spark_jars()] == ["spark-sql-kafka.jar"]


def staged_run(tmp_path, *, commit_marker: bool | None = None):
    """A staged job's local folder as the job leaves it (answers, quarantine, summary naming them) and a run folder
    in a store (fsspec's memory://); ``commit_marker``: the S3A route, Spark's _SUCCESS in the store or not."""
    import uuid

    from mm2_failover.adapters import store
    from mm2_failover.adapters.runfolder import CHECKPOINTS, CHECKPOINTS_SUMMARY, RunFolder
    from mm2_failover.adapters.spark import JobSubmission

    folder = RunFolder(f"memory://bucket-{uuid.uuid4().hex[:8]}/art/mm2_failover/run-1")
    staged = tmp_path / "stage"
    (staged / CHECKPOINTS).mkdir(parents=True)
    (staged / CHECKPOINTS / "part-00000.parquet").write_bytes(b"answers")
    (staged / f"{CHECKPOINTS}_quarantine").mkdir()
    (staged / f"{CHECKPOINTS}_quarantine" / "part-00000.parquet").write_bytes(b"bad records")
    output = str(staged / CHECKPOINTS)
    if commit_marker is not None:
        output = "s3a://" + store.url_of(folder.checkpoints).split("://", 1)[1]
        if commit_marker:
            store.write_bytes(folder.checkpoints / "_SUCCESS", b"")
    (staged / CHECKPOINTS_SUMMARY).write_text(
        json.dumps(
            {
                "output": output,
                "quarantined": 1,
                "quarantine_output": output + "_quarantine",
                "regressions_output": None,
            }
        )
    )
    return JobSubmission([], {}, {}, None, staged, folder, direct=commit_marker is not None), folder


def test_a_staged_jobs_quarantine_is_uploaded_and_its_summary_names_it_in_the_store(tmp_path):
    """The quarantine (and regressions) tables the summary names are in the store, under the names it gives: an
    operator told where the unusable records are finds them (staged: the local folder is deleted after the job)."""
    from mm2_failover.adapters import store

    sub, folder = staged_run(tmp_path)
    assert sub.publish()
    summary = folder.load_summary().raw
    want = store.url_of(folder.checkpoints) + "_quarantine"
    assert summary["quarantine_output"] == want and summary["output"] == store.url_of(folder.checkpoints)
    assert store.read_bytes(store.as_path(want) / "part-00000.parquet") == b"bad records"
    assert store.read_bytes(folder.checkpoints / "part-00000.parquet") == b"answers"


def test_through_s3a_the_summary_is_published_only_with_sparks_commit_marker(tmp_path):
    from mm2_failover.adapters import store
    from mm2_failover.adapters.runfolder import RunFolderError

    sub, folder = staged_run(tmp_path / "a", commit_marker=False)
    with pytest.raises(RunFolderError, match=r"_SUCCESS.*Run compute_latest_checkpoints again"):
        sub.publish()
    assert not store.exists(folder.checkpoints_summary)  # nothing vouches for answers Spark did not commit
    sub, folder = staged_run(tmp_path / "b", commit_marker=True)
    assert sub.publish() and folder.load_summary().raw["quarantine_output"].startswith("s3a://")


def test_a_reader_takes_only_the_parts_the_published_summary_names(tmp_path):
    """Answers rule 6 through the reader (stages.compute_checkpoints.whole_answers): the summary the task published names
    the parts it saw; a part added after (another try's), or one cut short, makes the answers unreadable, named."""
    from mm2_failover.adapters import store
    from mm2_failover.adapters.runfolder import RunFolderError
    from mm2_failover.stages.compute_checkpoints import whole_answers

    for direct in (False, True):
        sub, folder = staged_run(tmp_path / str(direct), commit_marker=True if direct else None)
        if direct:  # what Spark committed into the store
            store.write_bytes(folder.checkpoints / "part-00000.parquet", b"answers")
        assert sub.publish()
        assert folder.load_summary().raw["output_files"] == {"part-00000.parquet": 7}
        ctx = type("Ctx", (), {"folder": folder})()  # whole_answers reads only the run's folder
        assert whole_answers(ctx) == folder.checkpoints
        store.write_bytes(folder.checkpoints / "part-00001.parquet", b"stray")
        with pytest.raises(
            RunFolderError,
            match=r"part-00001.parquet: not named by the summary.*run "
            r"compute_latest_checkpoints again",
        ):
            whole_answers(ctx)
        store.remove_tree(folder.checkpoints / "part-00001.parquet")
        store.write_bytes(folder.checkpoints / "part-00000.parquet", b"answ")
        with pytest.raises(RunFolderError, match=r"part-00000.parquet: 4 bytes, the summary says 7"):
            whole_answers(ctx)
