"""Credentials on a real S3 server that checks them: a second moto server, started here with authentication
on (its first requests, which set up a bucket, an IAM user and that user's key and policy, are let through
unsigned). Bad keys, a wrong secret and a missing permission fail at once, naming the URI and the variables
to fix; ``AWS_PROFILE`` picks the credentials of a profile in the shared credentials file, as boto3 does."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from curator_slurm import fs
from curator_slurm.errors import InputError, OutputError
from support import s3tools
from support.helpers import clean_env

BUCKET = "curator-auth"
#: Unsigned requests the server accepts before it checks credentials: the set-up in :func:`auth_server`.
SETUP_ACTIONS = 5


@pytest.fixture(scope="module")
def auth_server() -> Iterator[tuple[str, dict[str, str]]]:
    """(endpoint, the access key of a user who may read and list, not write) of a moto server with
    authentication on, stopped by its pid at the end."""
    s3tools.endpoint()  # skips (or fails in CI) where the S3 test server is not set up
    pytest.importorskip("moto.server", reason="the authenticating server is moto's (the dev extra)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_ACTIONS)}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url, _set_up(url)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _set_up(url: str) -> dict[str, str]:
    import boto3

    unsigned = {"endpoint_url": url, "aws_access_key_id": "x", "aws_secret_access_key": "y", "region_name": "us-east-1"}
    s3 = boto3.client("s3", **unsigned)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="in/a.jsonl", Body=b'{"text": "a"}\n')
    iam = boto3.client("iam", **unsigned)
    iam.create_user(UserName="reader")
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    statement = {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}
    iam.put_user_policy(
        UserName="reader",
        PolicyName="read",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
    )
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


@pytest.fixture
def configured(auth_server: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url, _ = auth_server
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN", "CURATOR_S3_MAX_ATTEMPTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    fs.reset_s3()
    fs.reset_s3_stats()
    fs.configure_s3(endpoint_url=url, retry_base=0.001, retry_cap=0.01)
    yield url
    fs.reset_s3()


def _operations() -> list[tuple[type[Exception], str, object]]:
    uri = f"s3://{BUCKET}/in/a.jsonl"
    return [
        (InputError, uri, lambda: fs.size(uri)),
        (InputError, f"s3://{BUCKET}/in", lambda: fs.finished_files(f"s3://{BUCKET}/in", ".jsonl")),
        (InputError, uri, lambda: fs.read_bytes(uri)),
        (OutputError, f"s3://{BUCKET}/out/b", lambda: fs.atomic_write(f"s3://{BUCKET}/out/b", lambda f: f.write(b"x"))),
    ]


@pytest.mark.parametrize("which", ["unknown key", "wrong secret"])
def test_bad_credentials_fail_at_once_naming_the_uri_and_the_variables(
    configured: str, auth_server: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    good = auth_server[1]
    key = "AKIAUNKNOWNKEY000000" if which == "unknown key" else good["AWS_ACCESS_KEY_ID"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    fs.reset_s3()  # the next filesystem asks the SDK's chain, which reads the variables again
    fs.configure_s3(endpoint_url=configured, retry_base=0.001)
    for error, uri, operation in _operations():
        with pytest.raises(error) as failed:
            operation()  # type: ignore[operator]
        message = str(failed.value)
        assert message.startswith(f"{uri}: access denied")
        assert "AWS_ACCESS_KEY_ID" in message and "AWS_PROFILE" in message and "not-the-secret" not in message
    assert fs.s3_stats()["retries_total"] == 0


def test_a_missing_permission_names_what_is_not_allowed(
    configured: str, auth_server: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in auth_server[1].items():
        monkeypatch.setenv(name, value)
    fs.reset_s3()
    fs.configure_s3(endpoint_url=configured, retry_base=0.001)
    assert fs.read_bytes(f"s3://{BUCKET}/in/a.jsonl") == b'{"text": "a"}\n'
    assert fs.finished_files(f"s3://{BUCKET}/in", ".jsonl") == [f"s3://{BUCKET}/in/a.jsonl"]
    with pytest.raises(OutputError, match=f"^s3://{BUCKET}/out/b: access denied .* may write to the bucket {BUCKET}"):
        fs.atomic_write(f"s3://{BUCKET}/out/b", lambda f: f.write(b"x"))
    assert fs.s3_stats()["retries_total"] == 0


def test_aws_profile_picks_the_credentials_of_a_profile(
    auth_server: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, good = auth_server
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[curator]\naws_access_key_id = {good['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {good['AWS_SECRET_ACCESS_KEY']}\n"
        "[stale]\naws_access_key_id = AKIASTALEKEY00000000\naws_secret_access_key = stale\n"
    )
    code = textwrap.dedent(
        f"""
        from curator_slurm import fs
        try:
            print(fs.read_bytes("s3://{BUCKET}/in/a.jsonl").decode(), end="")
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    env = {
        k: v for k, v in clean_env().items() if not k.startswith("AWS_") and k not in ("HOME",)
    }  # no keys in the environment: the profile must supply them
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(credentials),
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_ENDPOINT_URL=url,
        AWS_DEFAULT_REGION="us-east-1",
        HOME=str(tmp_path),
    )
    outputs = {}
    for profile in ("curator", "stale"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "AWS_PROFILE": profile},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        outputs[profile] = done.stdout
    assert outputs["curator"] == '{"text": "a"}\n'
    assert outputs["stale"].startswith(f"InputError s3://{BUCKET}/in/a.jsonl: access denied")
