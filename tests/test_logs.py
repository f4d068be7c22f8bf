"""Where log lines go: through loguru, by default to stderr in the package's format with the shard and job in
every line (spawned workers' lines and a stage's own loguru or stdlib lines too); ``configure_logging`` sets the
level; a script's own loguru sinks get the package's lines; a script's own stdlib setup gets its own lines."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from loguru import logger

from curator_slurm import Pipeline, ShardSpec
from curator_slurm.logs import ROOT, CollectWarnings, configure_logging
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch
from support.executors import requires_ray, ship_test_module
from support.helpers import clean_env, logged

SCRIPT = """
import logging, os, sys
from pathlib import Path
from loguru import logger
from curator_slurm import LocalExecutor, Pipeline, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage


class FailsOnce(ProcessingStage):
    '''Logs each task with loguru; fails the first attempt of the first task that reaches it, in whichever
    worker that is, after a warning on its own stdlib logger.'''

    def __init__(self, flag):
        self.flag = flag

    def process(self, task):
        logger.info(f"loguru line for {task.task_id}")
        try:
            os.remove(self.flag)
        except FileNotFoundError:
            return task
        logging.getLogger("user_stage").warning("stdlib warning before failing")
        raise RuntimeError("first attempt fails")


if __name__ == "__main__":
    inp, out, flag, setup, method, workers, sink = sys.argv[1:8]
    if setup == "configure-warning":
        configure_logging("warning")  # any case
    elif setup == "configure-twice":
        configure_logging("WARNING")
        configure_logging("INFO")
    elif setup == "root-handler":
        logging.basicConfig(level=logging.INFO, format="ROOT %(name)s %(levelname)s %(message)s")
    elif setup in ("loguru-sink", "loguru-only"):
        if setup == "loguru-only":
            logger.remove()  # the script decides every sink: the package adds none
        logger.configure(patcher=lambda record: record["extra"].update(mine="kept"))  # the package's runs after
        columns = "{extra[shard]} | {extra[job]} | {extra[mine]} | {name} | {level} | {message}"
        logger.add(sink, level="INFO", format=columns)
    pipeline = Pipeline("logs").add_stage(JsonlReader(inp)).add_stage(FailsOnce(flag)).add_stage(ParquetWriter(out))
    result = pipeline.run(LocalExecutor(workers=int(workers), start_method=method, retry_backoff=0.01))
    if setup == "root-after":  # the script sets up its own stdlib logging only after a first run
        logging.basicConfig(level=logging.INFO, format="ROOT %(message)s")
        logging.getLogger("curator_slurm.check").warning("a package line after basicConfig")
        logging.getLogger("mine").warning("a line of the script after basicConfig")
    print(result.done, len(result.failed))
"""

ARRAY_TASK = {
    "SLURM_JOB_ID": "7001",
    "SLURM_ARRAY_JOB_ID": "7000",
    "SLURM_ARRAY_TASK_ID": "1",
    "SLURM_ARRAY_TASK_COUNT": "2",
    "SLURM_ARRAY_TASK_MIN": "0",
    "SLURM_ARRAY_TASK_MAX": "1",
    "SLURM_ARRAY_TASK_STEP": "1",
}
#: The package's line format: time | level | shard job | message.
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| (\w+) +\| (shard \d+/\d+|-) (job \S+|-) \| (.*)$")
RETRY = "stage 'fails_once' failed on task "
USER_STDLIB = "stdlib warning before failing"


def run_script(
    corpus: Path, tmp_path: Path, setup: str, method: str = "spawn", workers: int = 2
) -> subprocess.CompletedProcess[str]:
    script, flag = tmp_path / "logs.py", tmp_path / "flag"
    script.write_text(SCRIPT)
    flag.touch()
    args = [str(corpus), str(tmp_path / "out"), str(flag), setup, method, str(workers), str(tmp_path / "sink.log")]
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=180, env=clean_env(ARRAY_TASK)
    )
    assert proc.returncode == 0, proc.stderr
    assert not flag.exists(), "the failing attempt ran"
    done, failed = map(int, proc.stdout.split())
    assert done > 0 and failed == 0, proc.stdout
    return proc


def parsed(stderr: str) -> list[tuple[str, str, str, str]]:
    """(level, shard, job, message) of every line; fails on a line in any other format."""
    matches = [LINE.match(x) for x in stderr.splitlines()]
    assert matches and all(matches), stderr
    return [m.groups() for m in matches if m]  # type: ignore[misc]


@pytest.mark.parametrize(("method", "workers"), [("spawn", 2), ("fork", 2), ("spawn", 1)])
def test_without_any_setup_every_line_reaches_stderr_once_with_shard_and_job(
    corpus: Path, tmp_path: Path, method: str, workers: int
) -> None:
    """The driver's lines, a worker's retry warning and a stage's own loguru and stdlib lines: one format,
    this array task's shard and job in each, each line once."""
    lines = parsed(run_script(corpus, tmp_path, "none", method, workers).stderr)
    assert {(shard, job) for _, shard, job, _ in lines} == {("shard 1/2", "job 7000_1")}, lines
    messages = [message for _, _, _, message in lines]
    assert sum(m.startswith("pipeline 'logs': ") for m in messages) == 1, messages
    assert sum(m.startswith("shard 1/2: kept 6 of 12 source tasks") for m in messages) == 1, messages
    if workers > 1:
        assert sum(f"starting 2 worker processes by {method}" in m for m in messages) == 1, messages
    retried = [(level, m) for level, _, _, m in lines if m.startswith(RETRY)]
    assert len(retried) == 1 and retried[0][0] == "WARNING", lines
    assert retried[0][1].endswith("(attempt 1): RuntimeError('first attempt fails'); retrying")
    assert [(level, m) for level, _, _, m in lines if m == USER_STDLIB] == [("WARNING", USER_STDLIB)], lines
    loguru_lines = [m for level, _, _, m in lines if level == "INFO" and m.startswith("loguru line for ")]
    assert len(loguru_lines) == 7 and len(set(loguru_lines)) == 6, "6 tasks; the retried one logs twice"


def test_configure_logging_sets_the_level_for_driver_and_workers(corpus: Path, tmp_path: Path) -> None:
    lines = parsed(run_script(corpus, tmp_path, "configure-warning").stderr)
    assert sorted(m.split(" on task ")[0] for level, _, _, m in lines if level == "WARNING") == [
        "stage 'fails_once' failed",
        USER_STDLIB,
    ], lines
    assert all(level == "WARNING" and shard == "shard 1/2" for level, shard, _, _ in lines), "no INFO line"


def test_configure_logging_twice_prints_each_line_once_at_the_last_level(corpus: Path, tmp_path: Path) -> None:
    lines = parsed(run_script(corpus, tmp_path, "configure-twice").stderr)
    messages = [m for _, _, _, m in lines]
    assert sum(m.startswith("pipeline 'logs': ") for m in messages) == 1, "INFO shows, once"
    assert sum(m.startswith(RETRY) for m in messages) == 1 and messages.count(USER_STDLIB) == 1, messages


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_script_with_its_own_stdlib_handler_gets_its_lines_and_the_package_keeps_its_own(
    corpus: Path, tmp_path: Path, method: str
) -> None:
    """The package's lines go through loguru only (not also to the root handler): each is printed once,
    in the package's format. The stage's stdlib warning goes to the script's handler where the script
    installed it (the driver, a forked worker); a spawned worker has none and prints it the package's way."""
    stderr = run_script(corpus, tmp_path, "root-handler", method=method).stderr.splitlines()
    user = [x for x in stderr if USER_STDLIB in x]
    ours = parsed("\n".join(x for x in stderr if USER_STDLIB not in x))
    assert sum(m.startswith("pipeline 'logs': ") for _, _, _, m in ours) == 1
    assert sum(m.startswith(RETRY) for _, _, _, m in ours) == 1
    assert len(user) == 1, stderr
    if method == "fork":
        assert user == [f"ROOT user_stage WARNING {USER_STDLIB}"]
    else:
        assert parsed(user[0]) == [("WARNING", "shard 1/2", "job 7000_1", USER_STDLIB)]


def test_a_root_handler_added_after_a_run_gets_the_scripts_lines_not_the_package_lines(
    corpus: Path, tmp_path: Path
) -> None:
    stderr = run_script(corpus, tmp_path, "root-after", method="fork").stderr.splitlines()
    assert [x for x in stderr if "after basicConfig" in x and not LINE.match(x)] == [
        "ROOT a line of the script after basicConfig"
    ], stderr
    after = [m for _, _, _, m in parsed("\n".join(x for x in stderr if not x.startswith("ROOT ")))]
    assert after.count("a package line after basicConfig") == 1, stderr


def test_a_scripts_loguru_sink_receives_the_package_lines_with_shard_and_job(corpus: Path, tmp_path: Path) -> None:
    """Forked workers inherit the script's sink: their lines reach it too. loguru's own default stderr sink
    is replaced by the package's, so stderr shows every line once, in the package's format."""
    proc = run_script(corpus, tmp_path, "loguru-sink", method="fork")
    sink = (tmp_path / "sink.log").read_text().splitlines()
    assert all(x.startswith("shard 1/2 | job 7000_1 | kept | ") for x in sink), sink
    assert (
        sum(x.startswith("shard 1/2 | job 7000_1 | kept | curator_slurm | INFO | pipeline 'logs': ") for x in sink) == 1
    )
    assert sum(f"| WARNING | {RETRY}" in x for x in sink) == 1, "the forked worker's retry warning"
    assert sum(f"| user_stage | WARNING | {USER_STDLIB}" in x for x in sink) == 1, sink
    assert sum("| INFO | loguru line for " in x for x in sink) == 7, sink
    stderr = parsed(proc.stderr)
    assert sum(m.startswith("pipeline 'logs': ") for _, _, _, m in stderr) == 1


def test_a_script_that_chose_all_loguru_sinks_gets_nothing_on_stderr(corpus: Path, tmp_path: Path) -> None:
    """After ``logger.remove()`` the script's sinks are the only output: the package adds no stderr sink."""
    proc = run_script(corpus, tmp_path, "loguru-only", method="fork")
    assert proc.stderr == ""
    sink = (tmp_path / "sink.log").read_text()
    assert "| curator_slurm | INFO | pipeline 'logs': " in sink and RETRY in sink, sink


def test_an_unknown_level_names_the_parameter_and_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown log level 'verbose' for configure_logging\(level=...\); use DEBUG"):
        configure_logging("verbose")


def test_collect_warnings_takes_stdlib_and_loguru_warnings_once_each_and_leaves_out_ray() -> None:
    """What a Ray worker sends back to the driver: warnings and errors, from stdlib loggers it is attached
    to and from loguru calls, each once (a package record that went on to loguru is not taken twice)."""
    got: list[str] = []
    configure_logging("INFO")  # set up as the Ray worker does it: then the collector on both loggers
    collect = CollectWarnings(got.append)
    watched = [logging.getLogger(ROOT), logging.getLogger()]
    for watch in watched:
        watch.addHandler(collect)
    try:
        logging.getLogger(f"{ROOT}.test").warning("package warning %d", 1)
        logging.getLogger(f"{ROOT}.test").info("package info")
        logging.getLogger("user_stage").warning("stdlib warning of a stage")
        logging.getLogger("ray.serve").warning("Ray's own warning")
        logger.warning("loguru warning")
        logger.error("loguru error")
        logger.info("loguru info")
        logger.patch(lambda record: record.update(name="ray.data")).warning("Ray's own loguru warning")
    finally:
        for watch in watched:
            watch.removeHandler(collect)
        collect.close()
    logger.warning("after close")
    assert got == ["package warning 1", "stdlib warning of a stage", "loguru warning", "loguru error"]


def test_importing_the_package_does_not_import_loguru_a_run_does() -> None:
    """loguru costs tens of milliseconds (asyncio, ssl): ``import curator_slurm`` and the CLI's quick
    commands do not pay them, only a process that logs through the package."""
    code = (
        "import sys, curator_slurm, curator_slurm.stages, curator_slurm.logs, curator_slurm.cli\n"
        "print('loguru' in sys.modules)\n"
        "from curator_slurm.logs import ensure_logging\n"
        "ensure_logging()\n"
        "print('loguru' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=clean_env())
    assert out.stdout.split() == ["False", "True"], out.stderr


class WarnsBothWays(ProcessingStage[DocumentBatch, DocumentBatch]):
    """A stage that warns once per task through loguru and once through its own stdlib logger."""

    def params(self) -> dict[str, object]:
        return {}

    def process(self, task: DocumentBatch) -> DocumentBatch:
        # Imported here: Ray gets this test module's classes by value, and a module-level ``logger`` would
        # travel pickled, a copy of the driver's, not the worker's own (a stage module that Ray workers
        # import by name, as users' are, has the worker's).
        from loguru import logger

        logger.warning(f"loguru warning on {task.source_id}")
        logging.getLogger("user_stage").warning(f"stdlib warning on {task.source_id}")
        return task


@requires_ray
def test_on_ray_a_stages_loguru_and_stdlib_warnings_reach_the_driver_once_each(
    corpus: Path, tmp_path: Path, ray_cluster: str
) -> None:
    from curator_slurm.backends.ray import RayExecutor

    ship_test_module(sys.modules[__name__])
    pipeline = Pipeline("ray-logs").add_stage(JsonlReader(str(corpus))).add_stage(WarnsBothWays())
    pipeline.add_stage(ParquetWriter(tmp_path / "out"))
    with logged(logging.WARNING) as lines:
        result = pipeline.run(RayExecutor(max_actors_per_stage=1), shard=ShardSpec.single(), options=RunOptions())
    assert result.done == 12
    for way in ("loguru", "stdlib"):
        relayed = [x for x in lines if x.startswith(f"{way} warning on ")]
        assert len(relayed) == len(set(relayed)) == 12, lines


def test_loguru_disable_of_the_package_silences_its_lines_and_no_others(corpus: Path, tmp_path: Path) -> None:
    """loguru's way for a script to mute a library, ``logger.disable("curator_slurm")``, works on the
    package's lines (by the module that logs them) and leaves a stage's own lines alone."""
    from curator_slurm import LocalExecutor

    configure_logging("INFO")
    got: list[tuple[str, str]] = []
    sink = logger.add(lambda m: got.append((m.record["name"] or "", m.record["message"])), format="{message}")
    pipeline = Pipeline("muted").add_stage(JsonlReader(str(corpus))).add_stage(WarnsBothWays())
    pipeline.add_stage(ParquetWriter(tmp_path / "out"))
    logger.disable(ROOT)
    try:
        result = pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
    finally:
        logger.enable(ROOT)
        logger.remove(sink)
    assert result.done == 12
    assert not [line for line in got if line[0].startswith(ROOT)], "no line of the package"
    # (the stage's stdlib lines reach these sinks only if no root handler takes them first, as pytest's may)
    stage = [message for name, message in got if name == __name__]
    assert len(stage) == len(set(stage)) == 12 and all(m.startswith("loguru warning on ") for m in stage), got
