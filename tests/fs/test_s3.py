"""The filesystem layer on a real S3 server (moto, scripts/s3-up.sh; skipped without one, failed with
CURATOR_REQUIRE_S3=1): listing, ranged reads, whole-object uploads, retries of 503 SlowDown and reset
connections injected by a proxy in front of the server (counted exactly), bounded retries, permanent errors
that fail at once naming the URI and the fix (a missing bucket or key; denied access and bad credentials
on a second server with authentication on), credentials refused in URIs, and the start delay of array tasks.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import fs
from curator_slurm.errors import InputError, OptionError, OutputError, SettingError
from curator_slurm.settings import s3_settings
from support import s3tools
from support.helpers import clean_env

#: Variables that would change what the layer does, cleared for every test.
_AWS_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_PROFILE",
    "AWS_MAX_ATTEMPTS",
    "AWS_SESSION_TOKEN",
    "CURATOR_S3_MAX_ATTEMPTS",
    "CURATOR_S3_RETRY_BASE",
    "CURATOR_S3_RETRY_CAP",
    "CURATOR_S3_START_DELAY",
    "CURATOR_S3_ANONYMOUS",
)


@pytest.fixture
def layer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The layer with no S3 options of its own, fresh counts, and none of the caller's AWS variables."""
    for name in _AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    fs.reset_s3()
    fs.reset_s3_stats()
    yield
    fs.reset_s3()


@pytest.fixture
def s3(layer: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """The server's endpoint, with the test credentials in the environment and short waits between retries."""
    url = s3tools.endpoint()
    pytest.importorskip("boto3", reason="the S3 tests put and check objects with boto3 (the dev extra)")
    for name, value in s3tools.s3_env(url).items():
        monkeypatch.setenv(name, value)
    fs.configure_s3(retry_base=0.001, retry_cap=0.01)
    return url


def _put(url: str, bucket: str, key: str, body: bytes) -> None:
    s3tools.client(url).put_object(Bucket=bucket, Key=key, Body=body)


def _get(url: str, bucket: str, key: str) -> bytes:
    return s3tools.client(url).get_object(Bucket=bucket, Key=key)["Body"].read()  # type: ignore[no-any-return]


def test_listing_takes_sizes_and_leaves_hidden_and_skipped_names(s3: str) -> None:
    bucket = s3tools.new_bucket(s3)
    objects = {"in/a.jsonl": b"1\n", "in/sub/b.JSONL.gz": gzip.compress(b"22\n"), "in/c.txt": b"333"}
    objects["in/.d.jsonl.tmp-1-00000000"] = b"half"
    for key, body in objects.items():
        _put(s3, bucket, key, body)
    root = f"s3://{bucket}/in/"
    listing = fs.list_tree([root], fs.name_patterns([".jsonl"], compressed=True))
    want = {f"s3://{bucket}/{k}": len(objects[k]) for k in ("in/a.jsonl", "in/sub/b.JSONL.gz")}
    assert listing.sizes == want
    assert listing.skipped == [f"s3://{bucket}/in/c.txt"]
    assert listing.hidden == [f"s3://{bucket}/in/.d.jsonl.tmp-1-00000000"]
    assert fs.finished_files(f"s3://{bucket}/in", ".jsonl") == [f"s3://{bucket}/in/a.jsonl"]
    assert fs.info(f"s3://{bucket}/in/c.txt") == fs.FileInfo(f"s3://{bucket}/in/c.txt", 3)
    assert fs.exists(root) and fs.isdir(root) and not fs.exists(f"s3://{bucket}/nothing")
    with pytest.raises(InputError, match="a prefix"):
        fs.info(root)


def test_reads_are_ranged_and_decompress_what_other_tools_wrote(s3: str) -> None:
    """A range is one HEAD and one GET; a gzip object uploaded by boto3 reads back as its text; Parquet row
    groups come through the layer's file object, which pyarrow's readers take as it is."""
    bucket = s3tools.new_bucket(s3)
    text = b"".join(b'{"text": "line %d"}\n' % i for i in range(5000))
    _put(s3, bucket, "in/a.jsonl", text)
    _put(s3, bucket, "in/a.jsonl.gz", gzip.compress(text))
    table = pa.table({"n": list(range(10_000)), "s": [str(i) for i in range(10_000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=2_500)
    _put(s3, bucket, "in/t.parquet", sink.getvalue())
    with s3tools.fault_proxy(s3) as proxy:
        fs.configure_s3(endpoint_url=proxy.url)
        assert fs.read_range(f"s3://{bucket}/in/a.jsonl", 1000, 300) == text[1000:1300]
        assert dict(proxy.counts) == {"HEAD": 1, "GET": 1}
        with fs.open_decompressed(f"s3://{bucket}/in/a.jsonl.gz") as stream:
            assert stream.read() == text
        with fs.open_input(f"s3://{bucket}/in/a.jsonl") as f:
            f.seek(-20, io.SEEK_END)
            assert f.readline() == text[-20:] and f.read(5) == b""
        with pq.ParquetFile(fs.open_input(f"s3://{bucket}/in/t.parquet")) as parquet:
            assert parquet.metadata.num_row_groups == 4
            assert parquet.read_row_group(2).equals(table.slice(5_000, 2_500))
        assert pq.read_table(fs.open_input(f"s3://{bucket}/in/t.parquet")).equals(table)
    assert fs.s3_stats()["retries_total"] == 0


def test_uploads_are_whole_objects_with_the_bytes_as_written(s3: str) -> None:
    """A small object is one PUT; a large one a multipart upload; a ``.gz`` name keeps the bytes written (no
    second gzip by name); a writer that fails leaves no object; remove deletes, twice without error."""
    bucket = s3tools.new_bucket(s3)
    small, large = gzip.compress(b"x" * 1000), bytes(range(256)) * (48 << 10)  # 12 MiB: two parts
    with s3tools.fault_proxy(s3) as proxy:
        fs.configure_s3(endpoint_url=proxy.url)
        fs.atomic_write(f"s3://{bucket}/out/a.jsonl.gz", lambda f: f.write(small))
        assert dict(proxy.counts) == {"PUT": 1}
        fs.atomic_write(f"s3://{bucket}/out/big.bin", lambda f: f.write(large))
        assert proxy.counts["POST"] == 2 and proxy.counts["PUT"] == 3

        def broken(f: io.BufferedIOBase) -> None:
            f.write(b"half")
            raise RuntimeError("writer failed")

        with pytest.raises(RuntimeError):
            fs.atomic_write(f"s3://{bucket}/out/broken.bin", broken)
        fs.remove(f"s3://{bucket}/out/big.bin")
        fs.remove(f"s3://{bucket}/out/big.bin")
    assert _get(s3, bucket, "out/a.jsonl.gz") == small
    keys = [o["Key"] for o in s3tools.client(s3).list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert [k for k in keys if not k.endswith("/")] == ["out/a.jsonl.gz"]  # pyarrow leaves a marker "out/"
    assert fs.list_tree([f"s3://{bucket}/out"], None).files == [f"s3://{bucket}/out/a.jsonl.gz"]


def _workload(bucket: str) -> None:
    """Uploads, a listing, lookups, ranged and Parquet reads and a delete, checking every answer."""
    table = pa.table({"n": list(range(2000))})
    for i in range(6):
        fs.atomic_write(f"s3://{bucket}/in/{i}.jsonl", lambda f, i=i: f.write(b'{"n": %d}\n' % i * 100))
    fs.atomic_write(f"s3://{bucket}/in/t.parquet", lambda f: pq.write_table(table, f))
    listing = fs.list_tree([f"s3://{bucket}/in"], None)
    assert sorted(listing.sizes) == sorted(
        [f"s3://{bucket}/in/{i}.jsonl" for i in range(6)] + [f"s3://{bucket}/in/t.parquet"]
    )
    for i in range(6):
        uri = f"s3://{bucket}/in/{i}.jsonl"
        assert fs.size(uri) == len(b'{"n": %d}\n' % i * 100)
        assert fs.read_range(uri, 9, 9) == (b'{"n": %d}\n' % i)
        with fs.open_decompressed(uri) as stream:
            assert stream.read() == b'{"n": %d}\n' % i * 100
    assert pq.read_table(fs.open_input(f"s3://{bucket}/in/t.parquet")).equals(table)
    fs.remove(f"s3://{bucket}/in/0.jsonl")
    assert not fs.exists(f"s3://{bucket}/in/0.jsonl")


def test_faults_are_retried_and_every_retry_is_counted(s3: str) -> None:
    """20 % of requests answered 503 SlowDown or reset: every operation succeeds, and the layer counts exactly
    one retry per fault the proxy injected, by its cause (the proxy closes each connection, so curl cannot
    quietly resend a request on a dead reused one)."""
    bucket = s3tools.new_bucket(s3)
    with s3tools.fault_proxy(s3, fault_rate=0.2, seed=7, keep_alive=False) as proxy:
        fs.configure_s3(endpoint_url=proxy.url)
        _workload(bucket)
    stats = fs.s3_stats()
    assert sum(proxy.faults.values()) >= 5, proxy.faults  # the seed does inject faults
    assert stats["retries_total"] == sum(proxy.faults.values())
    assert stats["reasons"] == {
        k: v for k, v in {"throttled": proxy.faults["503"], "connection reset": proxy.faults["reset"]}.items() if v
    }
    assert stats["gave_up"] == {}
    assert stats["requests_total"] <= sum(proxy.counts.values())  # an attempt sends one request or more


def test_the_environment_alone_configures_a_process(s3: str) -> None:
    """A process configured only by the standard variables (AWS_ENDPOINT_URL at the proxy) and CURATOR_S3_*
    retries and reports its counts through s3_stats()."""
    bucket = s3tools.new_bucket(s3)
    code = textwrap.dedent(
        f"""
        import json
        from test_s3 import _workload
        from curator_slurm import fs
        _workload({bucket!r})
        print(json.dumps(fs.s3_stats()))
        """
    )
    here = Path(__file__).resolve().parent
    with s3tools.fault_proxy(s3, fault_rate=0.2, seed=11, keep_alive=False) as proxy:
        env = clean_env({**s3tools.s3_env(proxy.url), "CURATOR_S3_RETRY_BASE": "0.001", "CURATOR_S3_MAX_ATTEMPTS": "8"})
        env["PYTHONPATH"] = os.pathsep.join([str(here), str(here.parent), env.get("PYTHONPATH", "")])
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout.splitlines()[-1])
    assert sum(proxy.faults.values()) >= 5
    assert stats["retries_total"] == sum(proxy.faults.values()) and stats["gave_up"] == {}


def test_retries_are_bounded_and_the_error_names_the_uri_and_attempts(s3: str) -> None:
    bucket = s3tools.new_bucket(s3)
    with s3tools.fault_proxy(s3, fault_rate=1.0, keep_alive=False) as proxy:
        fs.configure_s3(endpoint_url=proxy.url, max_attempts=4)
        for kind, operation in [
            ("HEAD", lambda: fs.size(f"s3://{bucket}/in/a.jsonl")),
            ("LIST", lambda: fs.finished_files(f"s3://{bucket}/in", ".jsonl")),
            ("PUT", lambda: fs.atomic_write(f"s3://{bucket}/out/a.jsonl", lambda f: f.write(b"{}\n"))),
        ]:
            proxy.reset_counts()
            with pytest.raises(fs.S3RetryError) as failed:
                operation()
            assert dict(proxy.counts) == {kind: 4}
            message = str(failed.value)
            assert message.startswith(f"s3://{bucket}/") and "failed 4 time(s)" in message
            assert "after 4 attempt(s)" in message and "CURATOR_S3_MAX_ATTEMPTS" in message
            assert "throttled" in message or "connection reset" in message
    stats = fs.s3_stats()
    assert stats["retries"] == {"info": 3, "list": 3, "upload": 3}
    assert stats["gave_up"] == {"info": 1, "list": 1, "upload": 1}


def test_a_failed_read_opens_the_object_again_and_reads_the_same_range(s3: str) -> None:
    """A read that failed on every attempt leaves the file usable: the next read opens the object again (one
    HEAD) and asks for the same range; an object whose size changed meanwhile is an InputError."""
    bucket = s3tools.new_bucket(s3)
    body = bytes(range(256)) * 64
    _put(s3, bucket, "in/a.bin", body)
    uri = f"s3://{bucket}/in/a.bin"
    with s3tools.fault_proxy(s3, keep_alive=False) as proxy:
        fs.configure_s3(endpoint_url=proxy.url, max_attempts=3)
        with fs.open_input(uri) as f:
            f.seek(1000)
            proxy.fault_rate = 1.0
            with pytest.raises(fs.S3RetryError, match=f"^{uri}: reading failed 3 time"):
                f.read(100)
            proxy.fault_rate = 0.0
            proxy.reset_counts()
            assert f.tell() == 1000 and f.read(100) == body[1000:1100]
            assert dict(proxy.counts) == {"HEAD": 1, "GET": 1}
            proxy.fault_rate = 1.0
            with pytest.raises(fs.S3RetryError):
                f.read(100)
            _put(s3, bucket, "in/a.bin", body[:5000])
            proxy.fault_rate = 0.0
            with pytest.raises(InputError, match=f"^{uri}: its size changed from {len(body)} to 5000 bytes"):
                f.read(100)
    assert fs.s3_stats()["retries"] == {"read": 4}


def test_a_missing_bucket_or_key_fails_at_once_naming_it(s3: str) -> None:
    bucket = s3tools.new_bucket(s3)
    missing = "curator-no-such-bucket"
    with s3tools.fault_proxy(s3) as proxy:
        fs.configure_s3(endpoint_url=proxy.url)
        fix = f"bucket {missing} does not exist: create it or check the URI"
        for error, operation, uri in [
            (InputError, lambda u: fs.list_tree([u], None), f"s3://{missing}/in"),
            (InputError, fs.info, f"s3://{missing}/in/a.jsonl"),
            (InputError, fs.open_input, f"s3://{missing}/in/a.jsonl"),
            (InputError, lambda u: fs.finished_files(u, ".jsonl"), f"s3://{missing}/in"),
            (OutputError, fs.makedirs, f"s3://{missing}/out"),
            (OutputError, lambda u: fs.atomic_write(u, lambda f: f.write(b"x")), f"s3://{missing}/out/a"),
        ]:
            proxy.reset_counts()
            with pytest.raises(error) as failed:
                operation(uri)
            assert str(failed.value).startswith(uri) and fix in str(failed.value)
            assert sum(proxy.counts.values()) <= 3  # the lookup (a prefix: HEAD and LIST), a HEAD of the bucket
        with pytest.raises(InputError, match=f"^s3://{bucket}/nope.jsonl: no such object"):
            fs.open_input(f"s3://{bucket}/nope.jsonl")
    assert fs.s3_stats()["retries_total"] == 0


def test_credentials_in_a_uri_are_refused_and_never_repeated(layer: None) -> None:
    for uri in ("s3://AKIAEXAMPLE:se/cr+et@bucket/in", "s3://AKIAEXAMPLE@bucket/in", "gs://user:se/cr+et@b/x"):
        for operation in (fs.absolute, lambda u: fs.list_tree([u], None), lambda u: fs.atomic_write(u, print)):
            with pytest.raises(OptionError) as refused:
                operation(uri)
            message = str(refused.value)
            assert "AKIAEXAMPLE" not in message and "se/cr" not in message and "user" not in message
            assert "***@b" in message and "AWS_ACCESS_KEY_ID" in message and "AWS_PROFILE" in message
    assert fs.absolute("s3://bucket/a@b/c") == "s3://bucket/a@b/c"  # an @ in a key is no credential
    assert fs.absolute("hdfs://namenode:8020/data") == "hdfs://namenode:8020/data"  # a port is not one either
    with pytest.raises(OptionError, match="without credentials"):
        fs.configure_s3(endpoint_url="http://key:secret@127.0.0.1:9000")


def test_options_come_from_configure_then_the_environment(layer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://from-env:1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "5")
    assert fs.s3_options("b1") == fs.S3Options("http://from-env:1", "eu-west-1", False, 5, 0.1, 20.0, None, None)
    fs.configure_s3(endpoint_url="http://every:2", max_attempts=3)
    fs.configure_s3("s3://b1/prefix", endpoint_url="http://b1:3", anonymous=True)
    assert (fs.s3_options("b1").endpoint_url, fs.s3_options("b1").anonymous, fs.s3_options("b1").max_attempts) == (
        "http://b1:3",
        True,
        3,
    )
    assert (fs.s3_options("b2").endpoint_url, fs.s3_options("b2").region) == ("http://every:2", "eu-west-1")
    fs.reset_s3()
    assert fs.s3_options("b1").endpoint_url == "http://from-env:1"
    with pytest.raises(OptionError, match="max_attempts=0"):
        fs.configure_s3(max_attempts=0)


def test_a_bucket_can_have_its_own_endpoint(s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3tools.new_bucket(s3)
    _put(s3, bucket, "k", b"hello")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # nothing answers there
    fs.configure_s3(max_attempts=1)
    with pytest.raises(fs.S3RetryError, match="connection failed"):
        fs.size(f"s3://{bucket}/k")
    fs.configure_s3(bucket, endpoint_url=s3)
    assert fs.read_bytes(f"s3://{bucket}/k") == b"hello"


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://s3:2"}, "endpoint_url", "http://s3:2"),
        ({"AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "us-west-2"}, "region", "us-west-2"),
        ({"AWS_MAX_ATTEMPTS": "4", "CURATOR_S3_MAX_ATTEMPTS": "7"}, "max_attempts", 7),
        ({}, "max_attempts", 10),
        ({"CURATOR_S3_START_DELAY": "30"}, "start_delay", 30.0),
        ({"CURATOR_S3_ANONYMOUS": "1"}, "anonymous", True),
    ],
)
def test_s3_settings_read_the_standard_variables(env: dict[str, str], field: str, value: object) -> None:
    assert getattr(s3_settings(env), field) == value


@pytest.mark.parametrize(
    "env",
    [
        {"CURATOR_S3_MAX_ATTEMPTS": "0"},
        {"AWS_MAX_ATTEMPTS": "x"},
        {"CURATOR_S3_START_DELAY": "-1"},
        {"AWS_ENDPOINT_URL": "http://AKIAKEY:hidden@127.0.0.1:9000"},
    ],
)
def test_bad_s3_settings_name_the_variable(env: dict[str, str]) -> None:
    with pytest.raises(SettingError, match=next(iter(env))) as bad:
        s3_settings(env)
    assert "hidden" not in str(bad.value)


def test_start_jitter_waits_a_random_time_below_the_bound(layer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fs.start_jitter(0) == 0.0 and fs.start_jitter() == 0.0  # unset: no wait
    waits = [fs.start_jitter(0.002) for _ in range(20)]
    assert all(0 <= w < 0.002 for w in waits) and len(set(waits)) > 1
    monkeypatch.setenv("CURATOR_S3_START_DELAY", "0.003")
    assert 0 <= fs.start_jitter() < 0.003
    with pytest.raises(SettingError):
        fs.start_jitter(-1)
    monkeypatch.setenv("CURATOR_S3_START_DELAY", "soon")
    with pytest.raises(SettingError, match="CURATOR_S3_START_DELAY"):
        fs.start_jitter()
