"""Every sbatch option is declared once, on its ``SubmitOptions`` field: the parser of `submit` and
`retry`, the mapping of parsed arguments back to fields and the rendered script all follow from it."""

from __future__ import annotations

import argparse
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from curator_slurm.cli.commands import build_parser
from curator_slurm.slurm.options import SubmitOptions, add_option_arguments, option_fields, option_values
from curator_slurm.slurm.phases import load_submission, save_submission
from curator_slurm.slurm.submit import ArrayChunk, render_script

#: A value the user might give for each option, as typed on the command line.
TYPED = {
    "strategy": "balanced",
    "throttle": "3",
    "time": "1:00:00",
    "partition": "cpu",
    "cpus_per_task": "4",
    "mem": "8G",
    "gpus_per_task": "2",
    "nodes_per_task": "2",
    "job_name": "curate",
    "output_logs": "/w/logs",
    "signal": "B:USR1@60",
    "sbatch_args": "--qos=low",
    "env_setup": "module load x",
}
FLAGS = {"requeue", "accept_new_inputs", "no_steal"}


def _command_line(names: list[str]) -> list[str]:
    line: list[str] = []
    for name, option in option_fields():
        if name in names:
            flag = option.flag or "--" + name.replace("_", "-")
            line.append(flag if name in FLAGS else f"{flag}={TYPED[name]}")
    return line


def test_every_option_field_is_offered_and_comes_back_as_its_field() -> None:
    names = [name for name, _ in option_fields()]
    assert set(names) == set(TYPED) | FLAGS, "a new option needs a value in this test"
    args, unknown = build_parser().parse_known_args(["submit", "s.py", "--shards", "2", *_command_line(names)])
    assert unknown == []
    opts = SubmitOptions(script="/w/s.py", shards=2, run_dir="/w/run", **option_values(args))
    assert opts.sbatch_args == ("--qos=low",) and opts.env_setup == ("module load x",)
    assert (opts.throttle, opts.cpus_per_task, opts.nodes_per_task) == (3, 4, 2) and opts.requeue
    assert opts.strategy == "balanced" and opts.accept_new_inputs and opts.no_steal


def test_retry_keeps_what_the_user_did_not_give() -> None:
    args, _ = build_parser().parse_known_args(["retry", "/w/run", "--time", "3:00:00", "--requeue"])
    assert option_values(args) == {"time": "3:00:00", "requeue": True}
    first = SubmitOptions(script="/w/s.py", shards=4, run_dir="/w/run", mem="8G", sbatch_args=("--qos=low",))
    again = SubmitOptions.from_record(asdict(first)).with_arguments(option_values(args), keep=("shards",))
    assert again == SubmitOptions(**{**asdict(first), "time": "3:00:00", "requeue": True})


def test_strategy_is_not_an_option_of_retry() -> None:
    parser = argparse.ArgumentParser()
    add_option_arguments(parser, sbatch=True, defaults_from_run=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--strategy", "hash"])


@pytest.mark.parametrize(("name", "option"), [(n, o) for n, o in option_fields() if o.directive or o.env])
def test_each_option_with_a_directive_or_variable_reaches_the_script(name: str, option: object) -> None:
    value = {"time": "1:00:00", "partition": "cpu", "cpus_per_task": 4, "mem": "8G", "gpus_per_task": 2,
             "signal": "B:USR1@60", "strategy": "hash", "requeue": True, "accept_new_inputs": True,
             "no_steal": True}[name]  # fmt: skip
    script = render_script(SubmitOptions(script="/w/s.py", run_dir="/w/run", **{name: value}), ArrayChunk(0, 2))
    if option.directive:  # type: ignore[attr-defined]
        assert f"#SBATCH --{option.directive}={value}\n" in script  # type: ignore[attr-defined]
    if option.env:  # type: ignore[attr-defined]
        exported = option.flag_env if value is True else value  # type: ignore[attr-defined]
        assert f"export {option.env}={exported}\n" in script  # type: ignore[attr-defined]
    plain = render_script(SubmitOptions(script="/w/s.py", run_dir="/w/run"), ArrayChunk(0, 2))
    assert script != plain


def test_a_saved_record_of_unknown_or_listed_fields_reads_back() -> None:
    opts = SubmitOptions(script="/w/s.py", run_dir="/w/run", env=(("A", "1"),), sbatch_args=("--x",))
    record = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(opts).items()}
    record["env"] = [list(kv) for kv in opts.env]
    assert SubmitOptions.from_record({**record, "from_a_newer_version": 1}) == opts
    assert {f.name for f in fields(SubmitOptions)} >= {name for name, _ in option_fields()}


def test_a_workflow_submission_reads_back_as_the_options_it_saved(tmp_path: Path) -> None:
    opts = SubmitOptions(script="/w/s.py", script_args=("a",), run_dir=str(tmp_path), env=(("X", "1"),),
                         sbatch_args=("--qos=low",), requeue=True)  # fmt: skip
    save_submission(str(tmp_path), opts, {"hash": 3}, {"workflow": "w", "phases": [{"phase": "hash"}]})
    assert load_submission(str(tmp_path)) == (opts, {"hash": 3}, {"workflow": "w", "phases": [{"phase": "hash"}]})
