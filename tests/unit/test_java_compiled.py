"""Kafka's Java client helper (``jvm/KafkaOffsets.java``) is compiled once per source, classpath and JDK, not by the
JVM on every start (java_bridge.compiled_java): 1.2 s of every call on this machine, four calls in a failover at
thousands of groups. Runs the machine's real javac and java (no Kafka cluster: the helper's usage check)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mm2_failover.adapters.config import java_kafka_classpath
from mm2_failover.adapters.kafka import java_bridge
from mm2_failover.adapters.kafka.cluster import Cluster

SRC = java_bridge.JAVA_HELPER


def run(compiled: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["java", "-cp", f"{compiled / 'KafkaOffsets.jar'}:{java_kafka_classpath()}", "KafkaOffsets", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compiled_once_and_the_class_runs(tmp_path):
    # never skipped: this machine's JDK has javac; without it this fails instead of proving nothing
    assert shutil.which("javac"), "no javac on PATH: install a JDK (the machine's setup has one)"
    first = java_bridge.compiled_java(SRC, java_kafka_classpath(), tmp_path)
    assert first is not None and (first / "KafkaOffsets.class").is_file() and (first / "KafkaOffsets.jar").is_file()
    made = (first / "KafkaOffsets.jar").stat().st_mtime_ns
    again = java_bridge.compiled_java(SRC, java_kafka_classpath(), tmp_path)
    assert again == first and (first / "KafkaOffsets.jar").stat().st_mtime_ns == made  # not compiled again
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no half-made folder left beside it
    r = run(first, "nonsense")
    assert r.returncode == 2 and "usage: KafkaOffsets commit|read" in r.stderr


def test_a_changed_source_or_classpath_gets_its_own_build(tmp_path):
    src = tmp_path / "src" / "KafkaOffsets.java"
    src.parent.mkdir()
    src.write_text(SRC.read_text())
    cache = tmp_path / "cache"
    cache.mkdir()
    a = java_bridge.compiled_java(src, java_kafka_classpath(), cache)
    src.write_text(SRC.read_text().replace("usage: KafkaOffsets", "usage (changed): KafkaOffsets"))
    b = java_bridge.compiled_java(src, java_kafka_classpath(), cache)
    assert a is not None and b is not None and a != b
    assert "usage (changed): KafkaOffsets" in run(b, "x").stderr
    assert "usage: KafkaOffsets" in run(a, "x").stderr
    c = java_bridge.compiled_java(src, java_kafka_classpath() + ":/nowhere.jar", cache)
    assert c not in (a, b)


def test_a_source_javac_refuses_falls_back_to_running_the_source(tmp_path, caplog):
    src = tmp_path / "KafkaOffsets.java"
    src.write_text("public class KafkaOffsets { not java }")
    with caplog.at_level(logging.WARNING, logger="mm2_failover.adapters.kafka.java_bridge"):
        assert java_bridge.compiled_java(src, java_kafka_classpath(), tmp_path) is None
    assert "javac could not compile KafkaOffsets.java" in caplog.text
    assert [p.name for p in tmp_path.iterdir()] == ["KafkaOffsets.java"]  # nothing half-made kept


def test_no_javac_means_the_source_runs_as_before(tmp_path, monkeypatch):
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "javac" else real(name, *a, **k))
    assert java_bridge.compiled_java(SRC, java_kafka_classpath(), tmp_path) is None
    assert list(tmp_path.iterdir()) == []


# Class data sharing (java_bridge.ClassSharing): the first read writes the helper's class archive, the next map it.
# A cluster nobody listens on is enough: the helper with no groups builds its Admin client and exits 0 unconnected.

JDKS = sorted({shutil.which("java"), *map(str, Path("/usr/lib/jvm").glob("*/bin/java"))} - {None})


def nobody(tmp_path, monkeypatch) -> Cluster:
    monkeypatch.setattr(java_bridge, "private_dir", lambda: tmp_path)
    return Cluster({"bootstrap.servers": "127.0.0.1:1"}, "target", timeout=5)


def archives(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("jvm-KafkaOffsets-*/*classes-*"))


def commands(monkeypatch) -> list[list[str]]:
    """The JVM commands run_java_offsets starts (each still run)."""
    seen, real = [], subprocess.run

    def spy(cmd, *a, **k):
        if Path(cmd[0]).name == "java":  # not javac's compile
            seen.append(list(cmd))
        return real(cmd, *a, **k)

    monkeypatch.setattr(java_bridge.subprocess, "run", spy)
    return seen


def sharing_options(cmd: list[str]) -> list[str]:
    return [a for a in cmd if "Archive" in a or a.startswith("-Xlog")]


@pytest.mark.parametrize("java", JDKS)
def test_the_archive_options_are_valid_on_every_jdk_here(java):
    # an -Xlog selection naming a tag a JDK lacks stops that JVM before it starts (-XX:+IgnoreUnrecognizedVMOptions
    # covers only -XX flags): every JDK on this machine must start with them
    r = subprocess.run([java, *java_bridge.SHARING_QUIET, "-version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_the_first_read_writes_the_class_archive_silently_and_the_next_reads_map_it(tmp_path, monkeypatch):
    cluster = nobody(tmp_path, monkeypatch)
    with java_bridge.java_offsets_program(cluster, "test", share=True) as (command, props, _):
        (learn,) = [a for a in command if a.startswith("-XX:ArchiveClassesAtExit=")]
        r = subprocess.run([*command, "describe", str(props), "/dev/null"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "", r.stdout  # writing the archive says nothing on the answer's stdout
    assert Path(learn.split("=", 1)[1]).stat().st_size > 0
    assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []
    (jsa,) = [a for a in archives(tmp_path) if not a.startswith(".")]  # installed whole, under its own name
    assert jsa.startswith("classes-") and jsa.endswith(".jsa")
    seen = commands(monkeypatch)
    assert java_bridge.run_java_offsets(cluster, "read", [], 0) == []
    assert any(a.startswith("-XX:SharedArchiveFile=") and a.endswith(jsa) for a in seen[-1])
    with java_bridge.java_offsets_program(cluster, "test", share=True) as (command, props, _):
        # the JVM must really map it: -Xshare:on refuses to start otherwise
        r = subprocess.run(
            [command[0], "-Xshare:on", *command[1:], "describe", str(props), "/dev/null"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_commits_and_the_fenced_writer_never_use_the_archive(tmp_path, monkeypatch):
    # a commit JVM that failed with the archive could not be run again without it (the commit might have been sent),
    # and the long-lived fenced writer must not depend on a file another call wrote
    cluster = nobody(tmp_path, monkeypatch)
    assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []  # the archive now exists
    assert [a for a in archives(tmp_path) if a.endswith(".jsa") and not a.startswith(".")]
    seen = commands(monkeypatch)
    assert java_bridge.run_java_offsets(cluster, "commit", [], 0) == []
    assert len(seen) == 1 and sharing_options(seen[0]) == []
    with java_bridge.java_offsets_program(cluster, "test") as (command, _props, _):  # as fenced.py starts its writer
        assert sharing_options(command) == []


def test_a_truncated_archive_crashes_no_read_the_read_runs_again_without_it(tmp_path, monkeypatch, caplog):
    cluster = nobody(tmp_path, monkeypatch)
    crashes_here = set(Path.cwd().glob("hs_err_pid*.log"))
    assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []
    (jsa,) = tmp_path.glob("jvm-KafkaOffsets-*/classes-*.jsa")
    jsa.chmod(0o600)
    with jsa.open("r+b") as f:  # a file cut short (e.g. a host crash mid-write): Java 17 dies of SIGBUS mapping it
        f.truncate(4096)
    seen = commands(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="mm2_failover.adapters.kafka.java_bridge"):
        assert java_bridge.run_java_offsets(cluster, "read", [], 0) == []
    if len(seen) == 2:  # this JDK failed with it: refused for good, and the read answered without it
        assert "failed with its class archive" in caplog.text
        assert sharing_options(seen[1]) == [] and not jsa.exists()
        assert [a for a in archives(tmp_path)] == [jsa.name.replace(".jsa", ".off")]
        assert java_bridge.run_java_offsets(cluster, "read", [], 0) == []
        assert sharing_options(seen[-1]) == []
        assert list(tmp_path.glob("java-helper-hs_err-*.log"))  # the crash's report in the private folder
        assert set(Path.cwd().glob("hs_err_pid*.log")) == crashes_here  # never in the worker's working directory
    else:  # a JDK that checks the file and ignores it (Java 25) answered at once
        assert len(seen) == 1


def test_a_jvm_that_fails_writing_the_archive_is_read_again_without_it(tmp_path, monkeypatch, caplog):
    # a real JVM's real failure: an archive it cannot write makes Java 17 exit 1 after main (the read answered)
    cluster = nobody(tmp_path, monkeypatch)
    real = java_bridge.class_sharing

    def unwritable(compiled, java, learn):
        s = real(compiled, java, learn)
        return s and java_bridge.ClassSharing(s.archive, s.off, tmp_path / "nowhere" / "x.jsa" if learn else None)

    monkeypatch.setattr(java_bridge, "class_sharing", unwritable)
    seen = commands(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="mm2_failover.adapters.kafka.java_bridge"):
        assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []
    assert len(seen) == 2 and sharing_options(seen[1]) == []
    assert "failed with its class archive" in caplog.text
    (off,) = archives(tmp_path)
    assert off.endswith(".off")
    monkeypatch.setattr(java_bridge, "class_sharing", real)
    with java_bridge.java_offsets_program(cluster, "test", share=True) as (command, _props, _):
        assert sharing_options(command) == []


def test_a_failed_call_keeps_no_archive_and_a_left_learning_file_goes(tmp_path):
    learning = tmp_path / ".classes-x-1.jsa"
    learning.write_bytes(b"archive")
    s = java_bridge.ClassSharing(tmp_path / "classes-x.jsa", tmp_path / "classes-x.off", learning)
    s.done(ok=False)
    assert list(tmp_path.iterdir()) == []
    learning.write_bytes(b"archive")
    s.done(ok=True)
    assert [p.name for p in tmp_path.iterdir()] == ["classes-x.jsa"]
    (tmp_path / "classes-x.jsa").unlink()
    key = java_bridge.class_sharing(tmp_path, "java", learn=True).archive.name[len("classes-") : -len(".jsa")]
    old, new = tmp_path / f".classes-{key}-old.jsa", tmp_path / f".classes-{key}-new.jsa"
    for f in (old, new):
        f.write_bytes(b"x")
    os.utime(old, (0, 0))  # its JVM's caller died long ago
    java_bridge.class_sharing(tmp_path, "java", learn=True)
    assert not old.exists() and new.exists()


@pytest.mark.parametrize(
    "rc, said, runs",
    [
        (1, "Error occurred during initialization of VM\nCould not allocate compressed class space\n", 2),
        (-9, "", 1),  # killed (the OOM killer, an operator): not the archive's doing, not run again
    ],
)
def test_a_read_that_fails_for_its_own_reason_keeps_the_archive_and_says_why(tmp_path, monkeypatch, rc, said, runs):
    # the JVM's results stood in for (a host out of memory, a kill): what is decided from them is the point here
    cluster = nobody(tmp_path, monkeypatch)
    assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []
    (jsa,) = tmp_path.glob("jvm-KafkaOffsets-*/classes-*.jsa")
    seen = []

    def failing(cmd, *a, **k):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, rc, said, "")

    monkeypatch.setattr(java_bridge.subprocess, "run", failing)
    with pytest.raises(java_bridge.KafkaUnavailable) as e:
        java_bridge.run_java_offsets(cluster, "read", [], 0)
    assert len(seen) == runs and f"exit {rc}" in str(e.value)
    assert "Could not allocate compressed class space" in str(e.value) or not said  # the JVM's reason, not lost
    assert jsa.exists() and archives(tmp_path) == [jsa.name]  # kept; no .off: one bad moment costs nothing for good
