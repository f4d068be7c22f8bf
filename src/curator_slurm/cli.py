"""The ``curator-slurm`` command: submit, status, failures, retry, plan, local, shard.

Every command exits non-zero with a one-line reason on bad input; ``--json`` prints data as JSON.
A pipeline script's own arguments go after ``--``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import IO, Any

from curator_slurm import __version__
from curator_slurm.errors import CuratorError
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
from curator_slurm.slurm.local_array import run_local
from curator_slurm.slurm.options import SubmitOptions, add_option_arguments, option_values
from curator_slurm.slurm.phases import (
    parse_phase_shards,
    phase_shard_counts,
    preview_phases,
    save_submission,
    submit_phases,
)
from curator_slurm.slurm.retry import plan_retry, plan_workflow_retry
from curator_slurm.slurm.status import failure_rows, format_failures, status_report, workflow_phase_dirs
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

EXAMPLES = {
    "submit": """examples:
  curator-slurm submit curate.py --shards 100 --time 2:00:00 --cpus-per-task 8 -- --input data/ --output out/
  curator-slurm submit curate.py --shards 5000 --throttle 200 --dry-run -- --input data/ --output out/
  curator-slurm submit curate.py --shards 16 --nodes-per-task 4 -- --input data/ --output out/ --executor ray""",
    "status": """examples:
  curator-slurm status out/.curator-run
  curator-slurm status out/.curator-run --all --json
  curator-slurm status out/.curator-run --watch 30""",
    "failures": """examples:
  curator-slurm failures out/.curator-run
  curator-slurm failures out/.curator-run --traceback""",
    "retry": """examples:
  curator-slurm retry out/.curator-run
  curator-slurm retry out/.curator-run --shards 4 --time 1:00:00 --dry-run""",
    "plan": """examples:
  curator-slurm plan curate.py --shards 1000 -- --input data/ --output out/""",
    "local": """examples:
  curator-slurm local curate.py --shards 4 -- --input data/ --output out/
  curator-slurm local curate.py --shards 16 --parallel 2 --logs logs/ -- --input data/ --output out/""",
}


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
    summary = plan_summary(plan, args.shards)
    _print_json(summary) if args.json else print(format_plan(summary, plan["has_bytes"]))
    return 0


def _submit(
    opts: SubmitOptions, kind: str, dry_run: bool, as_json: bool, source_list: str | None = None, force: bool = False
) -> int:
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
    plan = run_plan(args.script, script_args)
    opts = submission_options(plan, args.script, script_args, args.shards, args.run_dir, option_values(args))
    sources = plan.pop("sources_table", None)
    if (idle := args.shards - len(plan["tasks"])) > 0:
        print(f"note: {args.shards} shards for {len(plan['tasks'])} source tasks; {idle} or more will have nothing "
              "to do", file=sys.stderr)  # fmt: skip
    if plan.get("kind") == "workflow":
        return _submit_workflow(args, opts, plan)
    check_before_submit(opts, plan, manifest=sources is not None)
    if sources is not None:  # plan once: the tasks load their shard of this listing
        opts, info = attach_manifest(opts, sources, "submit", args.dry_run)
        if info is not None:  # None on a dry run
            print(manifest_note(info, opts.strategy), file=_notes(args.json))
    if not args.dry_run:
        save_plan(opts.run_dir, plan)
    return _submit(opts, "submit", args.dry_run, args.json)


def _submit_workflow(args: argparse.Namespace, opts: SubmitOptions, plan: dict[str, Any]) -> int:
    """Every phase of a workflow at once, each phase's arrays behind the phase before (afterok)."""
    phase_sources = plan.pop("phase_sources", None)  # each phase's manifest (not part of the saved plan)
    names = [p["phase"] for p in plan["phases"]]
    counts = phase_shard_counts(plan, args.shards, parse_phase_shards(args.phase_shards, names))
    limits = array_limits(args.dry_run)[:2]
    if args.dry_run:
        for name, phase_opts, chunks in preview_phases(opts, plan, counts, limits):
            print(f"# === phase {name!r}: {phase_opts.shards} shards in {len(chunks)} array(s)")
            print("".join(render_script(phase_opts, chunk) for chunk in chunks), end="")
        return 0
    save_submission(plan["run_dir"], opts, counts, plan)
    submitted = submit_phases(opts, plan, counts, limits, sources=phase_sources)
    if args.json:
        _print_json({name: asdict(record) for name, record in submitted})
        return 0
    _print_phases(submitted)
    print(f"run directory: {plan['run_dir']}\nfollow with: curator-slurm status {plan['run_dir']}")
    return 0


def _print_phases(submitted: list[tuple[str, Submission]]) -> None:
    for name, record in submitted:
        jobs = ", ".join(str(a["job_id"]) for a in record.arrays)
        print(f"phase {name}: {record.shards} shards as {len(record.arrays)} array(s): {jobs}")


def cmd_retry(args: argparse.Namespace, _: list[str]) -> int:
    if workflow_phase_dirs(args.run_dir) is not None:
        return _retry_workflow(args)
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
        _print_phases(submit_phases(retry.opts, retry.plan, retry.counts, array_limits(False)[:2], start=retry.phase))
    return 0


# --- status / failures ------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace, _: list[str]) -> int:
    """The run's status, again every ``--watch`` seconds until nothing is left to wait for."""
    while True:
        report = status_report(args.run_dir, args.all)
        try:
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
        print()


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
    if args.json:
        _print_json([r if args.traceback else {k: v for k, v in r.items() if k != "traceback"} for r in rows + tasks])
    else:
        print(format_failures(rows, tasks, args.traceback))
    return 0


# --- local ------------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace, script_args: list[str]) -> int:
    failed = run_local(
        args.script, script_args, args.shards, args.logs, args.parallel, args.strategy, args.phase_shards
    )
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


DRY_RUN_HELP = "print the script(s) and sbatch command lines; submit nothing"


def _phase_shards_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--phase-shards", metavar="PHASE=N,...", help="a workflow's shards per phase, e.g. find=4,write=16")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curator-slurm",
        description="Run data-curation pipelines sharded across Slurm job arrays. "
        "A pipeline script's own arguments go after `--`.",
    )
    parser.add_argument("--version", action="version", version=f"curator-slurm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        form = argparse.RawDescriptionHelpFormatter
        return sub.add_parser(name, help=text, description=text, epilog=EXAMPLES.get(name), formatter_class=form)

    p = command("submit", "submit a pipeline script as one or more Slurm arrays of N shards")
    p.add_argument("script", help="the pipeline script (run unchanged in every array task)")
    p.add_argument("--shards", type=int, required=True, help="number of shards (array tasks in all)")
    p.add_argument("--run-dir", help="run directory (default: the pipeline's, inside the writer's output)")
    add_option_arguments(p, sbatch=False)
    _phase_shards_option(p)
    add_option_arguments(p, sbatch=True)
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    p.add_argument("--json", action="store_true")

    p = command("status", "progress of a run: source tasks done/failed/pending, throughput, ETA, jobs")
    p.add_argument("run_dir")
    p.add_argument("--all", action="store_true", help="show every shard")
    p.add_argument("--watch", type=float, metavar="SECONDS", help="refresh every SECONDS until nothing is pending")
    p.add_argument("--json", action="store_true")

    p = command("failures", "the failed source tasks of a run, with stage, error, files and log")
    p.add_argument("run_dir")
    p.add_argument("--traceback", action="store_true", help="show full tracebacks")
    p.add_argument("--json", action="store_true")

    p = command("retry", "resubmit only the source tasks of a run that are not done")
    p.add_argument("run_dir")
    p.add_argument("--shards", type=int, help="shards for the retry (default: about as large as the first run's)")
    p.add_argument("--force", action="store_true", help="retry even while jobs of this run are queued or running")
    add_option_arguments(p, sbatch=True, defaults_from_run=True)
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    p.add_argument("--json", action="store_true")

    p = command("plan", "list a script's source tasks and show how they split over N shards (reads no data)")
    p.add_argument("script")
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--json", action="store_true")

    p = command("local", "run a script as N shard processes on this machine, as an array would")
    p.add_argument("script")
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--parallel", type=int, help="processes at once (default: min(shards, CPUs))")
    p.add_argument("--logs", help="directory for shard-<i>.log (default: a new temporary directory)")
    add_option_arguments(p, sbatch=False)
    _phase_shards_option(p)

    p = command("shard", "print which shard this process would take, from the environment")
    p.add_argument("--json", action="store_true")
    return parser


COMMANDS = {
    "submit": cmd_submit,
    "status": cmd_status,
    "failures": cmd_failures,
    "retry": cmd_retry,
    "plan": cmd_plan,
    "local": cmd_local,
    "shard": cmd_shard,
}


def main(argv: Sequence[str] | None = None) -> int:
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
    except (CuratorError, OSError) as e:  # bad input or a failing command; anything else is a bug: traceback
        print(f"curator-slurm {args.command}: {e}", file=sys.stderr)
        return 2


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not raise BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
