"""Every command is a module-level function: a reader imports it and a test calls it with
keyword arguments, without the app or a command line."""

import importlib
import inspect
import json
from pathlib import Path

import pytest
import typer

VERBS = ("ab", "cases", "compare", "compile", "profile", "report", "run", "sol", "tune")


@pytest.mark.parametrize("verb", VERBS)
def test_each_verb_is_importable_at_module_level(verb):
    module = importlib.import_module(f"nvgg.commands.{verb}")
    fn = getattr(module, f"{verb}_cmd")
    assert callable(fn) and fn.__module__ == module.__name__ and fn.__qualname__ == f"{verb}_cmd"


def test_a_command_called_directly_writes_its_json(tmp_path):
    from nvgg.commands.sol import sol_cmd
    out = tmp_path / "sol.json"
    sol_cmd(case="1,2", profile="h100", json_out=str(out))
    doc = json.loads(out.read_text())
    assert doc["kind"] == "sol"
    assert sorted({s["case"] for s in doc["sol"]}) == ["1", "2"]
    assert {s["profile"] for s in doc["sol"]} == {"h100", "b200"}


def test_a_command_called_directly_fails_as_on_the_command_line(capsys):
    from nvgg.commands.sol import sol_cmd
    with pytest.raises(typer.Exit) as exc:
        sol_cmd(case="no-such-case")
    assert exc.value.exit_code == 2
    assert "no-such-case" in capsys.readouterr().err


def test_the_app_registers_the_same_functions():
    import typer.main

    from nvgg.cli import app
    group = typer.main.get_command(app)
    assert set(group.commands) == set(VERBS)
    for verb in VERBS:
        module = importlib.import_module(f"nvgg.commands.{verb}")
        assert inspect.unwrap(group.commands[verb].callback) is inspect.unwrap(getattr(module, f"{verb}_cmd"))
