"""The plan of a run: a real script listed in plan mode, and how its source tasks split over shards."""

from __future__ import annotations

from pathlib import Path

import pytest

from curator_slurm.errors import OptionError
from curator_slurm.runs.plan import format_plan, plan_summary, run_plan, save_plan, shard_loads
from curator_slurm.samples.corpus import make_corpus
from curator_slurm.slurm.status import collect_status
from support.helpers import EXAMPLE


def test_shard_loads_count_every_task_once_and_balanced_evens_skewed_weights() -> None:
    tasks = [[f"t{i}", 1000 if i < 3 else 10] for i in range(40)]
    for strategy in ("hash", "balanced"):
        loads = shard_loads(tasks, 4, strategy)
        assert sum(c for c, _ in loads) == 40 and sum(w for _, w in loads) == 3000 + 37 * 10
    assert max(w for _, w in shard_loads(tasks, 4, "balanced")) <= max(w for _, w in shard_loads(tasks, 4, "hash"))


def test_a_planned_script_is_summarised_and_its_saved_plan_gives_the_total(tmp_path: Path) -> None:
    make_corpus(str(tmp_path / "in"), files=6, docs_per_file=20, skew=2.0)
    out = tmp_path / "out"
    plan = run_plan(str(EXAMPLE), ["--input", str(tmp_path / "in"), "--output", str(out)])
    assert len(plan["tasks"]) == 6 and plan["sources_table"].num_rows == 6, "one source task per file"
    summary = plan_summary(plan, 3)
    assert summary["source_tasks"] == 6 and summary["manifest"] and summary["submit_strategy"] == "balanced"
    assert summary["strategies"]["balanced"]["imbalance"] <= summary["strategies"]["hash"]["imbalance"]
    text = format_plan(summary, plan["has_bytes"])
    assert text.startswith("6 source tasks over 3 shards") and "submit would use balanced" in text
    plan.pop("sources_table")
    save_plan(plan["run_dir"], plan)
    status = collect_status(plan["run_dir"])
    assert (status["total"], status["done"], status["pending"]) == (6, 0, 6), "nothing ran: all is pending"


def test_a_script_that_cannot_be_planned_is_refused_with_its_reason(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="no such pipeline script"):
        run_plan(str(tmp_path / "missing.py"), [])
    script = tmp_path / "broken.py"
    script.write_text("raise SystemExit('needs --input')\n")
    with pytest.raises(OptionError, match=r"listing the work of .*broken.py failed \(exit 1\): needs --input"):
        run_plan(str(script), [])
    (tmp_path / "nothing.py").write_text("print('no pipeline here')\n")
    with pytest.raises(OptionError, match="finished without running a Pipeline"):
        run_plan(str(tmp_path / "nothing.py"), [])
