"""The grace period after a stop signal does not use SIGALRM, so a stage that uses it for its own
time-outs (in the driver, workers=1) neither breaks the grace period nor is broken by it (issue 14, item 11)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from support.helpers import clean_env

SCRIPT = """\
import signal, sys, time
from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage


class UsesAlarm(ProcessingStage):
    '''Times its work out with SIGALRM, as some libraries do; its handler swallows the alarm.'''

    def setup(self, worker_metadata=None):
        self.alarms = 0
        signal.signal(signal.SIGALRM, self.on_alarm)

    def on_alarm(self, signum, frame):
        self.alarms += 1

    def process(self, task):
        signal.alarm(30)
        print("task started", flush=True)
        time.sleep(float(sys.argv[3]))  # a slow document
        signal.alarm(0)
        return task


if __name__ == "__main__":
    pipeline = Pipeline("alarm").add_stage(JsonlReader(sys.argv[1])).add_stage(UsesAlarm()).add_stage(
        ParquetWriter(sys.argv[2])
    )
    try:
        pipeline.run(LocalExecutor(workers=1))
    except PipelineFailedError as e:
        print(f"stopped: {e}", file=sys.stderr)
        sys.exit(1)
"""


def test_the_grace_period_ends_even_when_a_stage_owns_sigalrm(corpus: Path, tmp_path: Path) -> None:
    script = tmp_path / "alarm.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(corpus), str(tmp_path / "out"), "120"],
        env=clean_env({"CURATOR_GRACE_SECONDS": "1"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "task started\n"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)  # the stage alone would sleep 120 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "grace period of 1 s over; abandoning in-flight source tasks" in err, err
    assert "stopped by SIGTERM" in err and "0 source tasks done, 12 left" in err
