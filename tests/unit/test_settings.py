"""The deployment's settings set once (issue 52 item 1): ``[mm2_failover] <name>`` in Airflow's configuration (or
``AIRFLOW__MM2_FAILOVER__<NAME>``) for every component, the former ``MM2_FAILOVER_<NAME>`` variables still overriding
it for one release with a deprecation line, and messages that name where a bad value was set."""

from __future__ import annotations

import logging

import pytest

from mm2_failover.adapters import config
from mm2_failover.adapters.config import DEPLOYMENT_SETTINGS, WriterLockSettings, setting, setting_label, spark_io


def test_the_section_sets_it_and_the_former_variable_overrides_it_saying_it_is_deprecated(caplog, monkeypatch):
    monkeypatch.setattr(config, "_deprecation_said", set())
    env = {"AIRFLOW__MM2_FAILOVER__LOCK_TOPIC": "dr.locks"}
    assert setting("lock_topic", env) == "dr.locks" and setting_label("lock_topic", env) == "[mm2_failover] lock_topic"
    assert not caplog.records
    env["MM2_FAILOVER_LOCK_TOPIC"] = "old.locks"
    with caplog.at_level(logging.WARNING, logger="mm2_failover.adapters.config"):
        assert setting("lock_topic", env) == "old.locks" and setting("lock_topic", env) == "old.locks"
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said  # once per process
    assert "MM2_FAILOVER_LOCK_TOPIC is deprecated" in said[0] and "[mm2_failover] lock_topic" in said[0]
    assert setting_label("lock_topic", env) == "MM2_FAILOVER_LOCK_TOPIC"
    assert (
        setting("lock_topic", {}) is None and setting("lock_topic", {"AIRFLOW__MM2_FAILOVER__LOCK_TOPIC": " "}) is None
    )


def test_airflows_configuration_file_sets_it_where_airflow_is_loaded(monkeypatch):
    from airflow.configuration import conf

    monkeypatch.delenv("MM2_FAILOVER_SPARK_IO", raising=False)
    monkeypatch.delenv("AIRFLOW__MM2_FAILOVER__SPARK_IO", raising=False)
    monkeypatch.setattr(conf, "get", lambda section, key, fallback=None: "stage" if key == "spark_io" else fallback)
    assert setting("spark_io") == "stage"


def test_every_reader_takes_the_section_and_names_it_in_its_errors():
    section = {"AIRFLOW__MM2_FAILOVER__LOCK": "kafka", "AIRFLOW__MM2_FAILOVER__LOCK_LEASE_SECONDS": "90"}
    lock = WriterLockSettings.from_env(section)
    assert (lock.kind, lock.lease_s) == ("kafka", 90.0)
    with pytest.raises(ValueError, match=r"\[mm2_failover\] lock='zk': use one of file, kafka"):
        WriterLockSettings.from_env({"AIRFLOW__MM2_FAILOVER__LOCK": "zk"})
    with pytest.raises(ValueError, match=r"\[mm2_failover\] lock = kafka"):
        WriterLockSettings.from_env({"AIRFLOW__MM2_FAILOVER__ARTIFACTS": "s3://b/p"})
    assert spark_io({"AIRFLOW__MM2_FAILOVER__ARTIFACTS": "s3://b/p"}) == "s3a"
    with pytest.raises(ValueError, match=r"\[mm2_failover\] spark_io='x'"):
        spark_io({"AIRFLOW__MM2_FAILOVER__SPARK_IO": "x"})


def test_an_unknown_setting_is_a_bug_not_a_default():
    with pytest.raises(KeyError):
        setting("artifact")


def test_the_providers_configuration_section_documents_every_setting():
    from mm2_failover.provider_info import get_provider_info

    options = get_provider_info()["config"]["mm2_failover"]["options"]
    assert set(DEPLOYMENT_SETTINGS) <= set(options)
    assert "MM2_FAILOVER_ARTIFACTS" in options["artifacts"]["description"]


def test_the_settings_reference_page_is_generated_from_the_definition():
    from pathlib import Path

    from mm2_failover.adapters.config import settings_markdown

    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "settings.md"
    assert page.read_text() == settings_markdown(), "docs/reference/settings.md is out of date: run make reference"
    for name in DEPLOYMENT_SETTINGS:
        assert f"| `{name}` |" in page.read_text()


def test_a_process_without_airflow_loaded_reads_the_same_configuration_file(monkeypatch, tmp_path):
    """A review found the CLI (which runs without Airflow loaded) blind to airflow.cfg: with ``lock = kafka`` and
    the artifacts set there only, it took a file lock in another folder than the DAGs on the same host."""
    import sys

    (tmp_path / "airflow.cfg").write_text(
        "[core]\nload_examples = False\n\n[mm2_failover]\nlock = kafka\nartifacts = /shared/mm2\nsource_alias = dc1\n"
    )
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONFIG", raising=False)
    for var in (
        "MM2_FAILOVER_LOCK",
        "MM2_FAILOVER_ARTIFACTS",
        "AIRFLOW__MM2_FAILOVER__LOCK",
        "AIRFLOW__MM2_FAILOVER__ARTIFACTS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delitem(sys.modules, "airflow.configuration", raising=False)
    assert setting("lock") == "kafka" and setting("artifacts") == "/shared/mm2"
    assert WriterLockSettings.from_env().kind == "kafka"
    assert config.deployment_defaults()["source_alias"] == "dc1"
