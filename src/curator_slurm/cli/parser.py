"""The parser of the ``curator-slurm`` command (see :mod:`curator_slurm.cli`): its commands, options and
examples; the sbatch options come from :class:`~curator_slurm.slurm.options.SubmitOptions`' fields."""

from __future__ import annotations

import argparse

from curator_slurm import __version__
from curator_slurm.slurm.options import add_option_arguments, add_phase_arguments

EXAMPLES = {
    "submit": """examples:
  curator-slurm submit curate.py --shards 100 --time 2:00:00 --cpus-per-task 8 -- --input data/ --output out/
  curator-slurm submit curate.py --shards 5000 --throttle 200 --dry-run -- --input data/ --output out/
  curator-slurm submit curate.py --shards 16 --nodes-per-task 4 -- --input data/ --output out/ --executor ray
  curator-slurm submit fineweb.py --shards 1000 --time 10:00:00 --mem 4G --phase-time components=30:00:00 \
      --phase-mem components=64G,merge=16G --phase-sbatch-arg components=--qos=high -- --input warc/ --output out/""",
    "status": """examples:
  curator-slurm status out/
  curator-slurm status out/.curator-run --all --json
  curator-slurm status out/ --watch 10""",
    "report": """examples:
  curator-slurm report out/ -o report.html
  curator-slurm report s3://bucket/out -o /tmp/report.html""",
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
    add_phase_arguments(p)
    p.add_argument(
        "--dependency", metavar="JOBID[,JOBID]", help="start only after these jobs completed well (afterok): the "
        "array(s), or a workflow's first phase, wait for them"
    )  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    p.add_argument("--json", action="store_true")

    p = command("status", "progress of a run: source tasks done/failed/pending, throughput, ETA, jobs")
    p.add_argument("run_dir")
    p.add_argument("--all", action="store_true", help="show every shard")
    p.add_argument(
        "--watch", type=float, metavar="SECONDS", help="refresh every SECONDS until nothing pending can change"
    )
    p.add_argument(
        "--verify", action="store_true", help="also check that every done task's outputs exist with their recorded "
        "sizes and its inputs are unchanged (reads the whole ledger, stats every file)"
    )  # fmt: skip
    p.add_argument("--json", action="store_true")

    p = command("report", "write one self-contained HTML page about a run: progress, funnel, time, failures")
    p.add_argument("run_dir", help="the run directory, or the output (local or s3://) whose run directory it is")
    p.add_argument("-o", "--output", default="report.html", help="the page to write (default: report.html)")

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
    add_phase_arguments(p, only=("throttle",))

    p = command("shard", "print which shard this process would take, from the environment")
    p.add_argument("--json", action="store_true")
    return parser
