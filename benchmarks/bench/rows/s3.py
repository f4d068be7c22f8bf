"""Rows s1-s2 (issue #29): the package on S3, against a real S3 server on 127.0.0.1 (moto, as the tests use it).

s1: the demo job's reader (``JsonlReader`` as examples/curate.py builds it, one object per source task, as a
pipeline on ``LocalExecutor(workers=1)`` in this process) over the base corpus uploaded to a fresh bucket of the
shared server (``scripts/s3-up.sh``), MB/s, against a bare pyarrow loop over the same objects (``FileSelector``
listing, ``open_input_stream``, ``pyarrow.json.read_json`` with the reader's block size). s1j: the whole demo job
(read, both filters, Parquet written to local disk) with its input on S3 against the same job on the local copy,
docs/s: what reading from this server costs the job. The whole job is not compared with row 1's plain loop:
that loop's symbol-ratio regexes cost several times the filter's kernel, which would hide the reading.

s2a-s2b: 100,000 objects (2,000 with --quick) listed at submit time. s2a: ``curator_slurm.fs.list_tree``, s2b:
``curator-slurm plan examples/curate.py`` (what ``submit`` runs before it writes the manifest), each a fresh
process, against a bare boto3 ``list_objects_v2`` paginator over the same prefix; seconds, and objects/s and
the requests each made (counted at the server) in the notes. These run on a private moto server seeded in its
own process (``bench/seeded_s3.py``: PUTs over HTTP cost moto about 5 ms each, 8 minutes for 100,000), so the
shared server holds no 100,000 objects and nothing else shares it. moto itself answers a page of 1,000 keys
in about 0.6 s at that size (it sorts the whole bucket for every page), so seconds here are mostly moto's and
the requests and client CPU are the figures that carry over to a real store. One run per side: a side takes
a minute or more. ``plan`` is stopped at max(60 s, twice the bare listing) and the row says so.

Without an S3 server (or moto, for s2) the rows say "not measured" and why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.settings import job_environment
from curator_slurm.stages import JsonlReader

from ..context import Bench
from ..demo import EXAMPLE, JSON_BLOCK_SIZE, demo_pipeline
from ..harness import BenchError, Measure, Row, fresh_dir, progress, rotated, run_child
from ..s3 import (
    STATE_DIR,
    RequestLog,
    SeededServer,
    aws_env,
    environment,
    fresh_bucket,
    seeded_server,
    seeded_unavailable,
    shared_endpoint,
    upload,
)

S1_TITLES = {
    "s1": "S3 read, demo job's reader / bare pyarrow S3 loop, MB/s",
    "s1j": "demo job docs/s, input on S3 / input on local disk",
}
S2_TITLES = {
    "s2a": "fs.list_tree of S3 objects, s (value: A)",
    "s2b": "`curator-slurm plan` of S3 objects (submit's listing), wall s (value: A)",
}


def not_measured(key: str, title: str, why: str) -> Row:
    zero = [0.0]
    return Row(key, title, Measure("-", "s", zero), Measure("-", "s", zero), "report", 0.0, value=0.0,
               note=f"not measured: {why}")  # fmt: skip


def bench_s3_read(b: Bench) -> list[Row]:
    """Rows s1 and s1j on the shared server, in a fresh bucket deleted at the end."""
    url, why = shared_endpoint()
    if url is None:
        return [not_measured(k, t, why) for k, t in S1_TITLES.items()]
    corpus = b.corpus("base")
    with fresh_bucket(url) as bucket, environment(aws_env(url)), fresh_dir(b.out("s3-read")) as work:
        seconds = upload(url, bucket, "in", corpus.files)
        progress(
            f"rows s1-s1j: {corpus.size} in {len(corpus.files)} objects put into s3://{bucket}/in in {seconds:.1f} s"
        )
        uri = f"s3://{bucket}/in"
        sides = _read_sides(uri, corpus.path, work)
        log = RequestLog(STATE_DIR / "log" / "moto.log", bucket)
        requests: dict[str, str] = {}
        results: dict[str, list[tuple[tuple[int, ...], float]]] = {name: [] for name in sides}
        for name, fn in sides.items():  # untimed warm-up: connections, caches, the server's first requests
            log.mark()
            results[name].append(fn())
            time.sleep(0.2)  # the server logs a request after answering it
            requests[name] = log.summary()
        first = {name: r[0][0] for name, r in results.items()}
        results = {name: [] for name in sides}
        repeat = b.micro_repeat  # a few seconds a sample, against a server on the same (shared) cores
        for rep in range(repeat):
            for name, fn in rotated(list(sides.items()), rep):
                progress(f"rows s1-s1j: {name}, repeat {rep + 1}/{repeat} ({corpus.size}, {len(corpus.files)} objects)")
                results[name].append(fn())
    docs = {name: {n for n, _ in r} | {first[name]} for name, r in results.items()}
    if docs["reader"] != docs["bare"] or docs["job-s3"] != docs["job-local"] or len(docs["reader"]) != 1:
        raise BenchError(f"rows s1-s1j: the sides disagree on the documents read or kept: {docs}")
    mb = corpus.bytes / 1e6
    rate = {name: [mb / s for _, s in r] for name, r in results.items()}
    docs_in = next(iter(docs["reader"]))[0]
    dps = {name: [docs_in / s for _, s in results[name]] for name in ("job-s3", "job-local")}
    size = f"{corpus.size}, {len(corpus.files)} objects"
    return [
        Row("s1", f"{S1_TITLES['s1']} ({size}, 1 worker)", Measure("reader", "MB/s", rate["reader"]),
            Measure("bare pyarrow", "MB/s", rate["bare"]), ">=", 0.8,
            note=f"requests (warm-up run): reader {requests['reader']}; bare {requests['bare']}"),
        Row("s1j", f"{S1_TITLES['s1j']} ({size}, LocalExecutor(workers=1), Parquet to local disk)",
            Measure("input on S3", "docs/s", dps["job-s3"]), Measure("local input", "docs/s", dps["job-local"]),
            "report", 0.0, note=f"requests (warm-up run) with the input on S3: {requests['job-s3']}"),
    ]  # fmt: skip


Side = Callable[[], tuple[tuple[int, ...], float]]


def _read_sides(uri: str, local: Path, work: Path) -> dict[str, Side]:
    """The four sides of rows s1-s1j, each returning (what it read: documents, or documents in and out and files
    written; seconds)."""
    import pyarrow.fs as pafs
    import pyarrow.json as pj

    filesystem, inner = pafs.FileSystem.from_uri(uri)  # the AWS variables point it at the server

    def reader() -> tuple[tuple[int, ...], float]:
        run_dir = work / "reader-run"
        shutil.rmtree(run_dir, ignore_errors=True)
        start = time.perf_counter()
        pipeline = Pipeline("bench-s3-read").add_stage(JsonlReader(uri, files_per_partition=1))
        result = pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single(), run_dir=str(run_dir))
        return (result.rows_out,), time.perf_counter() - start

    def bare() -> tuple[tuple[int, ...], float]:
        start = time.perf_counter()
        infos = filesystem.get_file_info(pafs.FileSelector(inner, recursive=True))
        docs = 0
        options = pj.ReadOptions(block_size=JSON_BLOCK_SIZE)
        for info in sorted((i for i in infos if i.path.endswith(".jsonl")), key=lambda i: i.path):
            with filesystem.open_input_stream(info.path) as stream:
                docs += pj.read_json(stream, read_options=options).num_rows
        return (docs,), time.perf_counter() - start

    def job(source: str) -> Side:
        def run() -> tuple[tuple[int, ...], float]:
            out = work / "job-out"
            shutil.rmtree(out, ignore_errors=True)
            start = time.perf_counter()
            result = demo_pipeline(source, out).run(LocalExecutor(workers=1), shard=ShardSpec.single())
            seconds = time.perf_counter() - start
            return (result.rows_in, result.rows_out, len(result.output_files)), seconds

        return run

    return {"reader": reader, "bare": bare, "job-s3": job(uri), "job-local": job(str(local))}


#: s2's bare side: what a boto3 user writes to list a prefix (endpoint and credentials from the AWS variables).
BARE_LIST = """
import json, sys, time
import boto3
bucket, prefix = sys.argv[1:3]
s3 = boto3.client("s3")
start = time.perf_counter()
objects = size = 0
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
    for entry in page.get("Contents", []):
        objects += 1
        size += entry["Size"]
print(json.dumps({"objects": objects, "seconds": time.perf_counter() - start}))
"""

#: s2a's side: the package's listing, as a reader's partitioner calls it.
LIST_TREE = """
import json, sys, time
from curator_slurm import fs
start = time.perf_counter()
listing = fs.list_tree([sys.argv[1]], fs.name_patterns([".jsonl"], True))
print(json.dumps({"objects": len(listing.sizes), "seconds": time.perf_counter() - start}))
"""


def bench_s3_listing(b: Bench) -> list[Row]:
    """Rows s2a and s2b on a private seeded server (stopped at the end, with everything in it)."""
    why = seeded_unavailable()
    if why:
        return [not_measured(k, t, why) for k, t in S2_TITLES.items()]
    objects = 2_000 if b.quick else 100_000
    with fresh_dir(b.out("s3-listing")) as work:
        progress(f"rows s2a-s2b: starting a private moto server with {objects:,} objects")
        try:
            with seeded_server(work, objects) as server:
                return _listing_rows(server, work)
        except RuntimeError as e:
            return [not_measured(k, t, str(e).splitlines()[0]) for k, t in S2_TITLES.items()]


def _listing_rows(server: SeededServer, work: Path) -> list[Row]:
    env = aws_env(server.url)
    n = server.objects
    progress(f"rows s2a-s2b: {n:,} objects made in {server.seed_seconds:.1f} s; bare boto3 listing")
    server.log.mark()
    bare = run_child([sys.executable, "-c", BARE_LIST, server.bucket, server.prefix], env)
    bare_figures, bare_requests = json.loads(bare.stdout), server.log.summary()
    progress("rows s2a-s2b: fs.list_tree")
    server.log.mark()
    tree = run_child([sys.executable, "-c", LIST_TREE, server.uri], env)
    tree_figures, tree_requests = json.loads(tree.stdout), server.log.summary()
    for figures, side in ((bare_figures, "the bare listing"), (tree_figures, "fs.list_tree")):
        if figures["objects"] != n:
            raise BenchError(f"rows s2a-s2b: {side} found {figures['objects']:,} objects of {n:,}")
    limit = max(60.0, 2 * bare.wall)
    shards = max(1, n // 100)
    progress(f"rows s2a-s2b: curator-slurm plan --shards {shards} (stopped after {limit:.0f} s)")
    server.log.mark()
    cmd = [sys.executable, "-m", "curator_slurm.cli", "plan", str(EXAMPLE), "--shards", str(shards), "--json",
           "--", "--input", server.uri, "--output", str(work / "plan-out")]  # fmt: skip
    plan_wall, plan_cpu, plan_out, finished = limited_child(cmd, env, limit)
    time.sleep(0.2)
    plan_requests = server.log.summary()
    if finished and json.loads(plan_out)["source_tasks"] != n:
        raise BenchError(f"row s2b: plan found {json.loads(plan_out)['source_tasks']} source tasks of {n:,}")
    base = Measure("bare boto3", "s", [bare_figures["seconds"]])
    context = (f"{n:,} objects made in {server.seed_seconds:.1f} s inside the server; bare boto3 paginator "
               f"{bare_figures['seconds']:.1f} s ({n / bare_figures['seconds']:,.0f} objects/s, {bare_requests}, "
               f"{bare.cpu:.1f} s CPU in its process)")  # fmt: skip
    tree_note = (f"fs.list_tree {tree_figures['seconds']:.1f} s ({n / tree_figures['seconds']:,.0f} objects/s, "
                 f"{tree_requests}, {tree.cpu:.1f} s CPU in its process); {context}; one run per side")  # fmt: skip
    if finished:
        plan_note = (f"plan {plan_wall:.1f} s wall ({n / plan_wall:,.0f} objects/s, {plan_requests}, "
                     f"{plan_cpu:.1f} s CPU with the script it runs)")  # fmt: skip
    else:
        plan_note = (f"STOPPED after {limit:.0f} s (twice the bare listing), before it finished: A is a lower "
                     f"bound; by then it had made {plan_requests}")  # fmt: skip
    plan_note += f"; {context}; one run per side"
    return [
        Row("s2a", f"{S2_TITLES['s2a']} ({n:,} objects, local moto)", Measure("fs.list_tree", "s",
            [tree_figures["seconds"]]), base, "report", 0.0, value=tree_figures["seconds"], note=tree_note),
        Row("s2b", f"{S2_TITLES['s2b']} ({n:,} objects, --shards {shards}, local moto)", Measure("plan", "s",
            [plan_wall]), base, "report", 0.0, value=plan_wall, note=plan_note),
    ]  # fmt: skip


def limited_child(cmd: list[str], extra: dict[str, str], limit: float) -> tuple[float, float, str, bool]:
    """Run ``cmd`` (in its own process group, so whatever it starts goes with it) for at most ``limit`` seconds:
    (wall s, CPU s of it and the children it waited for, its standard output, whether it finished). A child that
    fails raises :class:`BenchError`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=job_environment(extra=extra), stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        finished = True
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > limit:
                os.killpg(proc.pid, signal.SIGKILL)  # the group of the child started here, by its id
                pid, status, usage = os.wait4(proc.pid, 0)
                finished = False
                break
            time.sleep(0.05)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        out.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        if finished and proc.returncode != 0:
            err.seek(0)
            raise BenchError(
                f"{' '.join(cmd)} exited {proc.returncode}:\n{err.read().decode('utf-8', 'replace')[-3000:]}"
            )
    return wall, usage.ru_utime + usage.ru_stime, stdout, finished
