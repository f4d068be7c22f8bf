"""The ``curator-slurm`` command: submit, status, report, failures, retry, plan, local, shard. Every command exits
non-zero with a one-line reason on bad input; ``--json`` prints data as JSON; a script's arguments go after ``--``."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import IO, Any

from curator_slurm import fs
from curator_slurm.cli.parser import EXAMPLES, build_parser  # noqa: F401 - EXAMPLES: tests import it from here
from curator_slurm.errors import CuratorError
from curator_slurm.runs.inputs import check_plan_inputs, plan_inputs
from curator_slurm.runs.manifest import attach_manifest
from curator_slurm.runs.plan import (
    check_before_submit,
    format_plan,
    manifest_note,
    plan_summary,
    run_plan,
    save_plan,
    shard_loads,  # noqa: F401 - the benchmarks import it from here
)
from curator_slurm.runs.rundir import default_run_dir_of
from curator_slurm.slurm.local_array import LocalStopped, run_local
from curator_slurm.slurm.locate import is_run_dir, locate_run_dir
from curator_slurm.slurm.options import SubmitOptions, option_values, requeue_signal
from curator_slurm.slurm.phases import (
    check_phases,
    parse_dependency,
    parse_phase_resources,
    parse_phase_shards,
    phase_option_texts,
    phase_shard_counts,
    preview_phases,
    refuse_if_workflow_busy,
    refuse_phase_options,
    resource_notes,
    save_submission,
    submit_phases,
    with_phase_resources,
)
from curator_slurm.slurm.retry import plan_retry, plan_workflow_retry
from curator_slurm.slurm.status import (
    check_run_dir,
    damaged_inputs,
    failure_rows,
    format_failures,
    status_report,
    workflow_phase_dirs,
)
from curator_slurm.slurm.step_submit import (
    dependency,
    format_steps,
    preview_steps,
    refuse_run_dir_for_steps,
    submit_steps,
)
from curator_slurm.slurm.submit import (
    Submission,
    array_limits,
    preview,
    refuse_if_busy,
    render_script,
    split_shards,
    submission_lock,
    submission_options,
    submit,
)

# --- helpers ----------------------------------------------------------------------------------------


def _split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Options for us before ``--``, the pipeline script's own arguments after it."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _notes(as_json: bool) -> IO[str]:
    """Where remarks go: stderr when stdout carries JSON."""
    return sys.stderr if as_json else sys.stdout


# --- plan / submit / retry --------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace, script_args: list[str]) -> int:
    plan = run_plan(args.script, script_args)
    if len(plan["plans"]) == 1 and not plan.get("glue"):
        summary = plan_summary(plan, args.shards)
        _print_json(summary) if args.json else print(format_plan(summary, plan["has_bytes"]))
        return 0
    steps = [plan_summary(step, args.shards) for step in plan["plans"]]  # a script of several steps, or glue
    if args.json:
        _print_json({"steps": steps, "glue": bool(plan.get("glue"))})
        return 0
    for k, (step, summary) in enumerate(zip(plan["plans"], steps, strict=True)):
        print(f"step {k}: {step.get('kind')} {step.get('pipeline')!r}\n{format_plan(summary, step['has_bytes'])}")
    if plan.get("glue"):
        print("glue: the script guards code with is_driver(); local and submit run it once, after every step")
    return 0


def _requeue_note(opts: SubmitOptions) -> None:
    """Say so when a short --time made --requeue's warning signal come earlier than the usual 120 s."""
    note = requeue_signal(opts.time)[1] if opts.requeue and opts.signal is None else None
    if note:
        print(f"note: {note}", file=sys.stderr)


def _submit(
    opts: SubmitOptions, kind: str, dry_run: bool, as_json: bool, source_list: str | None = None, force: bool = False
) -> int:
    _requeue_note(opts)
    max_size, max_tasks, origin = array_limits(dry_run)
    chunks = split_shards(opts.shards, max_size, max_tasks)
    if dry_run:
        arrays = preview(opts, chunks, kind)
        if as_json:
            _print_json({"max_array_size": max_size, "arrays": arrays})
            return 0
        print(f"# {opts.shards} shards in {len(chunks)} array(s) (MaxArraySize={max_size}, {origin})")
        for i, a in enumerate(arrays):
            print(f"# --- array {i}: shards {a['offset']}-{a['offset'] + a['size'] - 1}\n{a['script']}", end="")
            print(f"# command: {shlex.join(a['command'])}")
        return 0
    with submission_lock(opts.run_dir):
        refuse_if_busy(opts.run_dir, force)
        record = submit(opts, chunks, kind, source_list)
    if as_json:
        _print_json(asdict(record))
        return 0
    jobs = ", ".join(
        f"{a['job_id']} (shards {a['offset']}-{int(a['offset']) + int(a['size']) - 1})" for a in record.arrays
    )
    print(f"submitted {opts.shards} shards as {len(record.arrays)} array(s): {jobs}")
    print(f"run directory: {opts.run_dir}\nfollow with: curator-slurm status {opts.run_dir}")
    return 0


def cmd_submit(args: argparse.Namespace, script_args: list[str]) -> int:
    after = parse_dependency(args.dependency)
    plan = run_plan(args.script, script_args)
    if len(plan["plans"]) > 1 or plan.get("glue"):
        return _submit_steps(args, script_args, plan)
    opts = submission_options(plan, args.script, script_args, args.shards, args.run_dir, option_values(args))
    sources = plan.pop("sources_table", None)
    if (idle := args.shards - len(plan["tasks"])) > 0:
        print(f"note: {args.shards} shards for {len(plan['tasks'])} source tasks; {idle} or more will have nothing "
              "to do", file=sys.stderr)  # fmt: skip
    if plan.get("kind") == "workflow":
        return _submit_workflow(args, opts, plan, after)
    refuse_phase_options(args.script, phase_option_texts(vars(args)), args.phase_shards)
    opts = replace(opts, sbatch_args=(*opts.sbatch_args, *dependency(after)))  # a retry leaves it out
    plan_inputs(sources, opts.run_dir)  # first: a file changed under done work is refused, naming it
    check_before_submit(opts, plan, manifest=sources is not None)
    if sources is not None:  # plan once: the tasks load their shard of this listing
        opts, info = attach_manifest(opts, sources, "submit", args.dry_run)
        if info is not None:  # None on a dry run
            print(manifest_note(info, opts.strategy), file=_notes(args.json))
    if not args.dry_run:
        save_plan(opts.run_dir, plan)
    return _submit(opts, "submit", args.dry_run, args.json)


def _submit_workflow(args: argparse.Namespace, opts: SubmitOptions, plan: dict[str, Any], after: list[str]) -> int:
    """Every phase of a workflow at once, each phase's arrays behind the phase before (afterok), the first
    behind ``after`` (``--dependency``); each phase with its own resources."""
    phase_sources = plan.pop("phase_sources", None)  # each phase's manifest (not part of the saved plan)
    names = [p["phase"] for p in plan["phases"]]
    counts = phase_shard_counts(plan, args.shards, parse_phase_shards(args.phase_shards, names))
    given = parse_phase_resources(phase_option_texts(vars(args)), names)
    plan = with_phase_resources(plan, given)
    for note in resource_notes(plan, given, option_values(args)):
        print(f"note: {note}", file=sys.stderr)
    limits = array_limits(args.dry_run)[:2]
    _requeue_note(opts)
    check_plan_inputs(plan, phase_sources)
    if args.dry_run:
        for name, phase_opts, chunks in preview_phases(opts, plan, counts, limits, after):
            print(f"# === phase {name!r}: {phase_opts.shards} shards in {len(chunks)} array(s)")
            print("".join(render_script(phase_opts, chunk) for chunk in chunks), end="")
        return 0
    with submission_lock(plan["run_dir"]):  # one submission at a time per workflow, as per run
        refuse_if_workflow_busy(plan)
        check_phases(opts, plan, counts, phase_sources)
        save_submission(plan["run_dir"], opts, counts, plan)
        submitted = submit_phases(opts, plan, counts, limits, after=after, sources=phase_sources)
    if args.json:
        _print_json({name: asdict(record) for name, record in submitted})
        return 0
    _print_phases(submitted)
    print(f"run directory: {plan['run_dir']}\nfollow with: curator-slurm status {plan['run_dir']}")
    return 0


def _submit_steps(args: argparse.Namespace, script_args: list[str], plan: dict[str, Any]) -> int:
    """A script of several pipelines/workflows, or with glue (:mod:`curator_slurm.runs.steps`): each step
    behind the one before, then the driver job for the glue."""
    refuse_run_dir_for_steps(args.run_dir, len(plan["plans"]))

    def options_of(step: dict[str, Any]) -> SubmitOptions:
        return submission_options(step, args.script, script_args, args.shards, None, option_values(args))

    if args.dry_run:
        print(preview_steps(plan, options_of), end="")
        return 0
    given, after = phase_option_texts(vars(args)), parse_dependency(args.dependency)
    sent = submit_steps(plan, options_of, array_limits(False)[:2], args.phase_shards, given, after)
    _print_json(dict(sent)) if args.json else print(format_steps(sent, plan))
    return 0


def _print_phases(submitted: list[tuple[str, Submission]]) -> None:
    for name, record in submitted:
        jobs = ", ".join(str(a["job_id"]) for a in record.arrays)
        print(f"phase {name}: {record.shards} shards as {len(record.arrays)} array(s): {jobs}")


def cmd_retry(args: argparse.Namespace, _: list[str]) -> int:
    if workflow_phase_dirs(args.run_dir) is not None:
        return _retry_workflow(args)
    root = os.path.dirname(os.path.abspath(args.run_dir))
    if os.path.abspath(args.run_dir) in dict(workflow_phase_dirs(root) or []).values():
        # A phase is retried with the phases after it, behind none of the old jobs (they have ended).
        print(f"{args.run_dir} is a phase of the workflow in {root}: retrying the workflow", file=_notes(args.json))
        return _retry_workflow(argparse.Namespace(**{**vars(args), "run_dir": root}))
    retry = plan_retry(args.run_dir, args.shards, option_values(args), args.dry_run, args.force)
    if retry.opts is None:
        print(f"nothing to retry: all {retry.total} source tasks are done")
        return 0
    if retry.manifest is not None:
        print(manifest_note(retry.manifest, retry.opts.strategy), file=_notes(args.json))
    print(
        f"retrying {retry.remaining} of {retry.total} source tasks ({retry.failed} failed, "
        f"{retry.remaining - retry.failed} never finished) with {retry.opts.shards} shard(s)",
        file=_notes(args.json),
    )
    return _submit(retry.opts, "retry", args.dry_run, args.json, retry.source_list, force=args.force)


def _retry_workflow(args: argparse.Namespace) -> int:
    """Resubmit the first phase that is not complete (done work is skipped) and every phase after it."""
    retry = plan_workflow_retry(os.path.abspath(args.run_dir), args.shards, option_values(args), args.force)
    if retry.phase is None:
        print(f"nothing to retry: every phase of {retry.plan['workflow']!r} is complete")
        return 0
    later = f" and then {', '.join(retry.later)}" if retry.later else ""
    print(f"retrying phase {retry.phase} ({retry.missing} source task(s) not done){later}")
    if not args.dry_run:
        with submission_lock(retry.plan["run_dir"]):
            refuse_if_workflow_busy(retry.plan, args.force)
            sent = submit_phases(
                retry.opts, retry.plan, retry.counts, array_limits(False)[:2], start=retry.phase, sources=retry.sources
            )
        _print_phases(sent)
    return 0


#: Moves the cursor home and clears the terminal: `status --watch` redraws in place.
CLEAR_SCREEN = "\x1b[H\x1b[2J"

# --- status / failures ------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace, _: list[str]) -> int:
    """The run's status, again every ``--watch`` seconds until nothing is left to wait for: on a terminal in
    place (the screen cleared before each), elsewhere one after the other."""
    in_place = bool(args.watch) and not args.json and sys.stdout.isatty()
    if args.watch:
        args.run_dir = _wait_for_run_dir(getattr(args, "given", args.run_dir), args.run_dir, args.watch)
    while True:
        report = status_report(args.run_dir, args.all, args.verify, stats=args.json)  # the text shows no stats
        try:
            if in_place:
                sys.stdout.write(CLEAR_SCREEN + f"every {args.watch:g} s, until nothing can change (Ctrl-C stops)\n")
            _print_json(report.data) if args.json else print(report.text)
            sys.stdout.flush()
        except BrokenPipeError:  # `status | head -1`: the reader is gone, the exit code still tells
            if report.workflow:
                raise  # a workflow's status has always ended as a broken pipe does (141, see main)
            _silence_stdout()
            return report.code
        if not args.watch or report.settled:
            return report.code
        time.sleep(args.watch)
        if not in_place:
            print()


def _wait_for_run_dir(given: str, located: str, seconds: float) -> str:
    """The run directory ``given`` means, once there is one: `status --watch` started before the run (or
    its submission) made it waits, saying so once (on stderr), instead of failing."""
    said = False
    while not is_run_dir(located):
        if not said:
            print(f"waiting for a run in {given} (nothing there yet; checking every {seconds:g} s, Ctrl-C stops)",
                  file=sys.stderr, flush=True)  # fmt: skip
            said = True
        time.sleep(seconds)
        located = locate_run_dir(given)
    return located


def cmd_failures(args: argparse.Namespace, _: list[str]) -> int:
    phases = workflow_phase_dirs(args.run_dir)
    if phases is not None:
        code = 0
        for name, directory in phases:
            if os.path.isdir(directory):
                print(f"== phase {name}", file=_notes(args.json))
                code = max(code, cmd_failures(argparse.Namespace(**{**vars(args), "run_dir": directory}), []))
        return code
    rows, tasks = failure_rows(args.run_dir)
    damaged = damaged_inputs(args.run_dir)  # done tasks whose input was damaged (stages.notes)
    if args.json:
        listed = [r if args.traceback else {k: v for k, v in r.items() if k != "traceback"} for r in rows + tasks]
        _print_json(listed + [{"damaged": d} for d in damaged])
    else:
        print(format_failures(rows, tasks, args.traceback, damaged))
    return 0


def cmd_report(args: argparse.Namespace, _: list[str]) -> int:
    """Write the run's report page (the ``report`` extra draws its charts)."""
    from curator_slurm import extras
    from curator_slurm.fs import atomic_write_text
    from curator_slurm.slurm.report import report_data
    from curator_slurm.slurm.report_html import render_report

    extras.require("plotly", "curator-slurm report", "report")  # before reading a large ledger
    if workflow_phase_dirs(args.run_dir) is None:
        check_run_dir(args.run_dir)
    page = render_report(report_data(args.run_dir))
    atomic_write_text(os.path.abspath(args.output), page)
    print(f"report of {os.path.abspath(args.run_dir)}: {os.path.abspath(args.output)} ({len(page) / 1e6:.1f} MB)")
    return 0


# --- local ------------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace, script_args: list[str]) -> int:
    def busy(plan: dict[str, Any]) -> None:  # local beside the run's queued or running array tasks: refused
        if plan.get("kind") == "workflow":
            refuse_if_workflow_busy(plan)
        elif plan.get("run_dir"):
            refuse_if_busy(plan["run_dir"])

    try:
        failed = run_local(
            args.script, script_args, args.shards, args.logs, args.parallel, args.strategy, args.phase_shards,
            busy=busy, steal=not args.no_steal, phase_throttle=args.phase_throttle,
        )  # fmt: skip
    except LocalStopped as e:  # the shards ended (their summaries are in their logs); so does local
        return e.exit_code
    return 1 if failed else 0


# --- shard ------------------------------------------------------------------------------------------


def cmd_shard(args: argparse.Namespace, _: list[str]) -> int:
    from curator_slurm.shard import ShardSpec

    spec = ShardSpec.from_env()
    if args.json:
        _print_json({k: getattr(spec, k) for k in ("index", "count", "enabled", "strategy", "origin")})
    else:
        print(f"{spec.label} ({spec.origin}), strategy {spec.strategy}")
    return 0


# --- parser -----------------------------------------------------------------------------------------


#: The commands that look at an existing run, given its run directory or the output it wrote.
LOOKS_AT_A_RUN = ("status", "failures", "retry", "report")

COMMANDS = {
    "submit": cmd_submit,
    "status": cmd_status,
    "failures": cmd_failures,
    "report": cmd_report,
    "retry": cmd_retry,
    "plan": cmd_plan,
    "local": cmd_local,
    "shard": cmd_shard,
}


def main(argv: Sequence[str] | None = None) -> int:
    _escape_what_stdout_cannot_encode()
    ours, script_args = _split_argv(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(ours)
    if unknown:
        hint = ""
        if getattr(args, "script", None) and "--" not in (sys.argv[1:] if argv is None else argv):
            hint = (
                f"; the pipeline script's own options go after `--`, e.g. curator-slurm {args.command} "
                f"{shlex.quote(args.script)} ... -- {shlex.join(unknown)}"
            )
        parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "run_dir", None) and args.command in LOOKS_AT_A_RUN:
        # A run directory, or the output (local or s3://, of a pipeline or a workflow) whose run directory a
        # run put in its default place: `status OUT` means OUT/.curator-run (slurm.locate).
        args.given, args.run_dir = args.run_dir, locate_run_dir(args.run_dir)
    elif getattr(args, "run_dir", None) and fs.is_uri(args.run_dir):
        # An output on object storage: its run directory is local (runs.rundir.default_run_dir_of).
        args.run_dir = default_run_dir_of(args.run_dir)
    for name in ("shards", "parallel", "throttle"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            print(f"curator-slurm {args.command}: --{name} {value}: must be >= 1", file=sys.stderr)
            return 2
    try:
        return COMMANDS[args.command](args, script_args)
    except BrokenPipeError:  # the reader of our output (`| head -1`) has all it wanted
        _silence_stdout()
        return 141  # what a shell reports for a process that SIGPIPE ended
    except KeyboardInterrupt:  # Ctrl-C outside a run (planning, `status --watch`): a line, not a traceback
        print(f"curator-slurm {args.command}: interrupted", file=sys.stderr)
        return 130
    except (CuratorError, OSError) as e:  # bad input or a failing command; anything else is a bug: traceback
        print(f"curator-slurm {args.command}: {e}", file=sys.stderr)
        return 2


def _escape_what_stdout_cannot_encode() -> None:
    """Print a file name that is not UTF-8 (held as surrogate escapes) with its bytes escaped, as stderr
    does, where a strict stdout (a UTF-8 locale's) would end the command with UnicodeEncodeError. A stdout
    that already passes them through (the C locale's ``surrogateescape``) writes the name's own bytes."""
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not raise BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
