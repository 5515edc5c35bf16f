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

SRC = java_bridge.JAVA_HELPER


def run(compiled: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["java", "-cp", f"{compiled}:{java_kafka_classpath()}", "KafkaOffsets", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compiled_once_and_the_class_runs(tmp_path):
    # never skipped: this machine's JDK has javac; without it this fails instead of proving nothing
    assert shutil.which("javac"), "no javac on PATH: install a JDK (the machine's setup has one)"
    first = java_bridge.compiled_java(SRC, java_kafka_classpath(), tmp_path)
    assert first is not None and (first / "KafkaOffsets.class").is_file()
    made = (first / "KafkaOffsets.class").stat().st_mtime_ns
    again = java_bridge.compiled_java(SRC, java_kafka_classpath(), tmp_path)
    assert again == first and (first / "KafkaOffsets.class").stat().st_mtime_ns == made  # not compiled again
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
