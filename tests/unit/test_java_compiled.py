"""Kafka's Java client helper (``jvm/KafkaOffsets.java``) is compiled once per source, classpath and JDK, not by the
JVM on every start (java_bridge.compiled_java): 1.2 s of every call on this machine, four calls in a failover at
thousands of groups. Runs the machine's real javac and java (no Kafka cluster: the helper's usage check)."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

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


# Class data sharing (java_bridge.ClassSharing): the first call writes the helper's class archive, the next map it.
# A cluster nobody listens on is enough: the helper with no groups builds its Admin client and exits 0 unconnected.


def nobody(tmp_path, monkeypatch) -> Cluster:
    monkeypatch.setattr(java_bridge, "private_dir", lambda: tmp_path)
    return Cluster({"bootstrap.servers": "127.0.0.1:1"}, "target", timeout=5)


def archives(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("jvm-KafkaOffsets-*/*classes-*"))


def test_the_first_call_writes_the_class_archive_and_the_next_calls_map_it(tmp_path, monkeypatch):
    cluster = nobody(tmp_path, monkeypatch)
    assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []
    (jsa,) = archives(tmp_path)  # one archive, nothing half-written beside it
    assert jsa.startswith("classes-") and jsa.endswith(".jsa")
    with java_bridge.java_offsets_program(cluster, "test") as (command, props):
        assert any(a.startswith("-XX:SharedArchiveFile=") and a.endswith(jsa) for a in command)
        # the JVM must map it: -Xshare:on refuses to start otherwise
        r = subprocess.run(
            [command[0], "-Xshare:on", *command[1:], "describe", str(props), "/dev/null"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[warning][cds]" not in r.stdout  # the helper's stdout is its answer
    assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []
    assert archives(tmp_path) == [jsa]


def test_a_jvm_that_cannot_start_with_an_archive_runs_without_it_from_then_on(tmp_path, monkeypatch, caplog):
    cluster = nobody(tmp_path, monkeypatch)
    real = java_bridge.class_sharing

    def unwritable(compiled, java, learn):  # a real JVM's real refusal: an archive it cannot write
        s = real(compiled, java, learn)
        return s and java_bridge.ClassSharing(s.archive, s.off, tmp_path / "nowhere" / "x.jsa" if learn else None)

    monkeypatch.setattr(java_bridge, "class_sharing", unwritable)
    with caplog.at_level(logging.WARNING, logger="mm2_failover.adapters.kafka.java_bridge"):
        assert java_bridge.run_java_offsets(cluster, "describe", [], 0) == []
    assert "refused class data sharing" in caplog.text
    (off,) = archives(tmp_path)
    assert off.endswith(".off")
    monkeypatch.setattr(java_bridge, "class_sharing", real)
    with java_bridge.java_offsets_program(cluster, "test", sharing=[None]) as (command, _props):
        assert not any("Archive" in a or "-Xshare" in a for a in command)


def test_a_failed_call_keeps_no_archive(tmp_path):
    learning = tmp_path / ".classes-x-1.jsa"
    learning.write_bytes(b"archive")
    s = java_bridge.ClassSharing(tmp_path / "classes-x.jsa", tmp_path / "classes-x.off", learning)
    s.done(ok=False)
    assert list(tmp_path.iterdir()) == []
    learning.write_bytes(b"archive")
    s.done(ok=True)
    assert [p.name for p in tmp_path.iterdir()] == ["classes-x.jsa"]
