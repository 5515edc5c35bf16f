"""Issue 32, issue 51: rules/run_params.PARAMS (default and so type, title, help, section, flag, bounds, the allowed
values with their labels, whether a run's results depend on it) is the one definition of every run parameter;
RunParams (its fields, CHOICES and RESULT_PARAMS), the trigger form (params.py), the CLI's flags (cli.py) and the
reference page are generated from it. This compares them."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from mm2_failover import cli
from mm2_failover.rules.run_params import PARAMS, SECTIONS, RunParams

NAMES = [f.name for f in fields(RunParams)]
D = RunParams()


def the_cli_flags() -> dict[str, argparse.Action]:
    apply = next(a for a in cli.parser()._subparsers._group_actions[0].choices.items() if a[0] == "apply")[1]
    return {a.dest: a for a in apply._actions}


def test_every_parameter_has_one_definition_and_a_section():
    assert sorted(PARAMS) == sorted(NAMES)
    assert all(spec.section in SECTIONS and spec.title and spec.help for spec in PARAMS.values())


@pytest.mark.parametrize("name", NAMES)
def test_the_trigger_form_is_the_definition(name):
    from mm2_failover.params import ASKED, failover_params

    param, spec = failover_params()[name], PARAMS[name]
    default = getattr(D, name)
    if name in ASKED:  # issue 49: typed by whoever triggers the failover (".*" is a choice, not a default)
        assert not param.has_value and param.schema["minLength"] == 1
        assert failover_params(scheduled=True)[name].value == default  # a scheduled DAG: nobody types
    elif default == "":  # issue 49: an optional text is nullable and starts empty, so that the form submits as it opens
        assert param.value is None and param.schema["type"] == ["null", "string"]
    else:
        assert param.value == default
    assert (param.schema["title"], param.description, param.schema["section"]) == (spec.title, spec.help, spec.section)
    assert param.schema.get("enum") == (list(RunParams.CHOICES[name]) if name in RunParams.CHOICES else None)
    # issue 33: a readable label for every allowed value, from the same definition (none for a free value)
    if name in RunParams.CHOICES:
        assert list(spec.labels) == list(RunParams.CHOICES[name]), name
        assert all(label.startswith(f"{value}: ") for value, label in spec.labels.items()), spec.labels
        assert param.schema["values_display"] == spec.labels
    else:
        assert spec.labels is None and "values_display" not in param.schema
    if spec.bounds:
        assert (param.schema["minimum"], param.schema.get("maximum")) == spec.bounds
    else:
        assert "minimum" not in param.schema and "maximum" not in param.schema


@pytest.mark.parametrize("name", NAMES)
def test_the_command_line_is_the_definition(name):
    spec, flags = PARAMS[name], the_cli_flags()
    if spec.cli_flag(name) is None:
        assert name not in flags
        return
    action = flags[name]
    assert spec.cli_flag(name) in action.option_strings
    default = getattr(D, name)
    if isinstance(default, bool):
        assert isinstance(action, argparse._StoreFalseAction if default else argparse._StoreTrueAction)
        return
    assert action.default == default
    assert tuple(action.choices or ()) == tuple(RunParams.CHOICES.get(name, ()))
    if spec.bounds:
        low, high = spec.bounds
        assert action.type(str(low)) == low
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(str(low - 1))
        if high is not None:
            with pytest.raises(argparse.ArgumentTypeError):
                action.type(str(high + 1))
            with pytest.raises(ValueError, match=f"parameter {name}"):
                RunParams(**{name: high + 1})
        with pytest.raises(ValueError, match=f"parameter {name}"):
            RunParams(**{name: low - 1})


def test_the_form_is_ordered_by_section():
    from mm2_failover.params import failover_params

    sections = [PARAMS[n].section for n in failover_params()]
    assert sections == sorted(sections, key=SECTIONS.index)


def test_the_incidents_decisions_come_first():
    """Issue 49: which groups, dry run or not, is the source reachable, approval - the first section of the form."""
    from mm2_failover.params import failover_params

    first = [n for n, prm in failover_params().items() if prm.schema["section"] == SECTIONS[0]]
    assert first == ["groups_regex", "dry_run", "source_reachable", "require_approval"]


@pytest.mark.parametrize("name", [n for n in NAMES if isinstance(getattr(D, n), str)])
def test_an_empty_text_reaches_the_run_as_empty_never_as_none(name):
    """The operators' templates render a nullable text the form left empty (None) as "", and a typed one as typed."""
    from jinja2 import Template

    t = Template(RunParams.templates()[name])
    assert t.render(params={name: None}) == ""
    assert RunParams.from_mapping({name: t.render(params={name: getattr(D, name) or None})}) == D


def test_the_allowed_values_and_what_binds_a_run_are_the_specs():
    """Issue 51: a parameter's choices and whether it binds a run are said once, in its ParamSpec."""
    assert RunParams.CHOICES == {n: tuple(s.labels) for n, s in PARAMS.items() if s.labels}
    assert set(RunParams.RESULT_PARAMS) == {n for n, s in PARAMS.items() if s.binds}
    assert {"groups_regex", "translation", "source_reachable"} <= set(RunParams.RESULT_PARAMS)
    assert not {"drain_timeout_seconds", "apply_concurrency", "dry_run"} & set(RunParams.RESULT_PARAMS)
    with pytest.raises(ValueError, match="translation"):
        RunParams(translation="nearest")


def test_the_parameters_reference_page_is_generated_from_the_definition():
    """Issue 52 item 4 / issue 51: docs/reference/parameters.md is what the one definition gives (``make reference``
    writes it), so a parameter added there appears on the page as in the form and the CLI."""
    from pathlib import Path

    from mm2_failover.rules.run_params import PARAMS, RunParams, parameters_markdown

    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "parameters.md"
    assert page.read_text() == parameters_markdown(), "docs/reference/parameters.md is out of date: run make reference"
    for name in RunParams.RESULT_PARAMS[:3] + ("approver_not_triggerer", "lock_wait_seconds"):
        assert f"| `{name}` ({PARAMS[name].title}) |" in page.read_text()


def test_the_topology_set_once_in_airflows_configuration_is_every_dags_default_and_the_clis(monkeypatch):
    """Issue 52 item 1: ``[mm2_failover]`` (here its environment form) sets the MM2 topology for the deployment: the
    failover's form, the scheduled DAGs' parameters and the CLI's flags default to it; a run's conf still wins."""
    from mm2_failover import cli
    from mm2_failover.adapters.config import deployment_defaults
    from mm2_failover.params import archive_params, failover_params

    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__SOURCE_ALIAS", "dc1")
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__REPLICATION_POLICY", "identity")
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__SOURCE_CONNECTIONS", '{"dc1": "kafka_dc1"}')
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__GROUPS_REGEX", "not-topology")  # not the topology: ignored
    assert deployment_defaults() == {
        "source_alias": "dc1",
        "source_connections": {"dc1": "kafka_dc1"},
        "replication_policy": "identity",
    }
    f = failover_params()
    assert (f["source_alias"].value, f["replication_policy"].value) == ("dc1", "identity")
    assert f["source_connections"].value == {"dc1": "kafka_dc1"} and not f["groups_regex"].has_value  # still asked
    assert failover_params(scheduled=True)["groups_regex"].value == ".*"
    a = archive_params()
    assert (a["source_alias"].value, a["replication_policy"].value) == ("dc1", "identity")
    cli.flag_defaults.cache_clear()
    try:
        args = cli.parser().parse_args(["plan"])
        assert (args.source_alias, args.replication_policy) == ("dc1", "identity")
        assert cli.parser().parse_args(["plan", "--source-alias", "dc9"]).source_alias == "dc9"
    finally:
        cli.flag_defaults.cache_clear()
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__REPLICATION_POLICY", "bogus")
    with pytest.raises(
        ValueError,
        match=r"\[mm2_failover\] in Airflow's configuration: parameter replication_policy: "
        r"'bogus' is not one of default, identity",
    ):
        deployment_defaults()


def test_a_bad_topology_in_the_configuration_is_a_usage_error_naming_it():
    from testbed.localenv import run_cli

    r = run_cli(
        "plan",
        "--target-bootstrap",
        "127.0.0.1:1",
        env={"AIRFLOW__MM2_FAILOVER__OFFSET_SYNCS_LOCATION": "x"},
        timeout=120,
        quiet_s=None,
    )
    assert (
        r.returncode == 2 and "[mm2_failover] in Airflow's configuration: parameter offset_syncs_location" in r.stderr
    )
