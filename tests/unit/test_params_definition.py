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


def the_cli_flags(ap: argparse.ArgumentParser | None = None, command: str = "apply") -> dict[str, argparse.Action]:
    ap = cli.parser() if ap is None else ap
    sub = next(a for a in ap._subparsers._group_actions[0].choices.items() if a[0] == command)[1]
    return {a.dest: a for a in sub._actions}


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


def test_a_parameter_added_in_one_place_appears_in_runparams_the_form_the_cli_and_the_page(capsys):
    """Issue 51 item 2: two ParamSpecs added to a copy of the definition - and nothing else written - are fields of
    the RunParams generated from it, fields of the trigger form, flags of the CLI and rows of the reference page, each
    with its default, bounds or allowed values, title and help; an existing parameter changed in the copy changes in
    all four (no generator reads anything but the definition it is given). Today's definition is left as it was."""
    from dataclasses import replace

    from mm2_failover.params import failover_params, run_params_template
    from mm2_failover.rules.run_params import ParamSpec, parameters_markdown, run_params_class, text_template

    colours = {"blue": "blue: the report's usual colour", "green": "green: the other colour"}
    specs = {
        **PARAMS,
        "fetch_batch": ParamSpec(
            default=500,
            title="Fetch batch",
            help="How many records one read asks for. A test's parameter.",
            section="Advanced",
            bounds=(10, 1000),
        ),
        "report_colour": ParamSpec(
            default="blue",
            title="Report colour",
            help="Which colour the report is drawn in.",
            section="What to move",
            labels=colours,
            binds=True,
            cli_help="the report's colour",
        ),
        "lock_wait_seconds": replace(PARAMS["lock_wait_seconds"], default=7, bounds=(5, 9), title="Lock wait (test)"),
    }

    # RunParams: the fields, their defaults and types, the allowed values, what binds a run, the checks, the templates
    cls = run_params_class(specs)
    assert [f.name for f in fields(cls)] == [*NAMES, "fetch_batch", "report_colour"]
    assert {f.name: f.type for f in fields(cls)}["fetch_batch"] is int
    assert (cls().fetch_batch, cls().report_colour, cls().lock_wait_seconds) == (500, "blue", 7)
    assert cls.CHOICES["report_colour"] == ("blue", "green")
    assert "report_colour" in cls.RESULT_PARAMS and "fetch_batch" not in cls.RESULT_PARAMS
    assert cls.from_mapping({"fetch_batch": "20", "report_colour": "green"}).fetch_batch == 20
    for bad in ({"fetch_batch": 9}, {"fetch_batch": 1001}, {"report_colour": "red"}, {"lock_wait_seconds": 10}):
        with pytest.raises(ValueError, match=f"parameter {next(iter(bad))}"):
            cls(**bad)
    assert run_params_template({"fetch_batch": 1, "report_colour": None}, cls) == {
        "fetch_batch": "{{ params.fetch_batch }}",
        "report_colour": text_template("report_colour"),
    }

    # the trigger form: the field, its default, type, bounds or allowed values with their labels, title, help, section
    form = failover_params(specs=specs)
    batch, colour, wait = form["fetch_batch"], form["report_colour"], form["lock_wait_seconds"]
    assert list(form)[-1] == "fetch_batch"  # Advanced, the form's last section, after today's parameters there
    assert (batch.value, batch.description) == (500, specs["fetch_batch"].help)
    assert batch.schema == {
        "type": "integer",
        "title": "Fetch batch",
        "section": "Advanced",
        "minimum": 10,
        "maximum": 1000,
    }
    assert (colour.value, colour.description, colour.schema["title"]) == (
        "blue",
        specs["report_colour"].help,
        "Report colour",
    )
    assert (colour.schema["section"], colour.schema["enum"], colour.schema["values_display"]) == (
        "What to move",
        ["blue", "green"],
        colours,
    )
    assert (wait.value, wait.schema["minimum"], wait.schema["maximum"], wait.schema["title"]) == (
        7,
        5,
        9,
        "Lock wait (test)",
    )
    assert batch.resolve(20) == 20 and colour.resolve("green") == "green"
    for field_, value in ((batch, 9), (batch, 1001), (colour, "red"), (wait, 10)):
        with pytest.raises(ValueError):  # the form refuses it (Airflow's ParamValidationError)
            field_.resolve(value)

    # the CLI: the flags, their defaults and help; a value outside the bounds or the allowed values is refused
    ap = cli.parser(specs)
    a = ap.parse_args(["plan"])
    assert (a.fetch_batch, a.report_colour, a.lock_wait_seconds) == (500, "blue", 7)
    a = ap.parse_args(["plan", "--fetch-batch", "20", "--report-colour", "green"])
    assert (a.fetch_batch, a.report_colour) == (20, "green")
    assert ap.parse_args(["rollback", "--backup", "b.json", "--lock-wait-seconds", "9"]).lock_wait_seconds == 9
    flags = the_cli_flags(ap, "plan")
    assert (flags["fetch_batch"].help, flags["report_colour"].help) == (
        "How many records one read asks for",
        "the report's colour",
    )
    assert tuple(flags["report_colour"].choices) == ("blue", "green")
    for argv in (
        ["plan", "--fetch-batch", "9"],
        ["plan", "--fetch-batch", "1001"],
        ["plan", "--report-colour", "red"],
        ["rollback", "--backup", "b.json", "--lock-wait-seconds", "10"],
    ):
        with pytest.raises(SystemExit):
            ap.parse_args(argv)

    # the reference page: a row in its section with the default, the bounds or allowed values, the flag, binds, help
    page = parameters_markdown(specs)
    advanced = page.split("\n## Advanced\n", 1)[1]
    assert (
        "| `fetch_batch` (Fetch batch) | `500` | 10 to 1000 | `--fetch-batch` |  | How many records one read asks for. "
        "A test's parameter. |" in advanced
    )
    moving = page.split("\n## What to move\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "| `report_colour` (Report colour) | `blue` | `blue`: blue: the report's usual colour; `green`: green: the "
        "other colour | `--report-colour` | yes | Which colour the report is drawn in. |" in moving
    )
    assert "| `lock_wait_seconds` (Lock wait (test)) | `7` | 5 to 9 | `--lock-wait-seconds` |" in page

    # today's definition and what is generated from it: as they were
    assert "fetch_batch" not in PARAMS and not hasattr(RunParams(), "fetch_batch")
    assert RunParams().lock_wait_seconds == PARAMS["lock_wait_seconds"].default != 7
    assert "fetch_batch" not in failover_params() and "fetch_batch" not in parameters_markdown()
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["plan", "--fetch-batch", "20"])
    capsys.readouterr()  # argparse's refusals


def test_a_definition_the_generators_could_not_carry_is_refused_naming_the_parameter():
    from mm2_failover.rules.run_params import ParamSpec, run_params_class

    def spec(**kw) -> dict:
        return {"x": ParamSpec(**{"title": "X", "help": "X.", "section": "Advanced", **kw})}

    for kw, says in (
        ({"default": 1.5}, "parameter x: a default of type float"),
        ({"default": "a", "bounds": (0, 1)}, "parameter x: bounds are for a whole number"),
        ({"default": 1, "labels": {"1": "1: one"}}, "parameter x: allowed values are for a text"),
        ({"default": 0, "bounds": (1, 9)}, "parameter x: 0 is not a whole number from 1 to 9"),
        ({"default": "c", "labels": {"a": "a: A", "b": "b: B"}}, "parameter x: 'c' is not one of a, b"),
    ):
        with pytest.raises(ValueError, match=says):
            run_params_class(spec(**kw))
