"""Paths and URIs: what a user writes (``data/in``, ``file:///abs/in``, ``s3://bucket/in``) turned into one
canonical string, and into the ``pyarrow.fs`` filesystem that serves it; a URI with credentials is refused."""

from __future__ import annotations

import os
import posixpath
import re
import threading
from typing import Any

from ..errors import OptionError
from .retry import call
from .s3 import options_generation, s3_options

#: ``scheme://``: RFC 3986 schemes; a Windows drive (``C:\\``) has no ``//`` and one letter, so it is not one.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def scheme(path: str | os.PathLike) -> str | None:
    """The URI scheme of ``path`` in lower case (``"s3"``), ``None`` for a plain local path. ``file://`` is a
    scheme here too; :func:`is_local` says whether the ``os`` module serves it."""
    match = _SCHEME.match(os.fspath(path))
    return match.group(1).lower() if match else None


def is_uri(path: str | os.PathLike) -> bool:
    """Whether ``path`` is served by ``pyarrow.fs`` rather than the ``os`` module (not local, see :func:`is_local`)."""
    return not is_local(path)


def is_local(path: str | os.PathLike) -> bool:
    """Whether ``path`` is on a local (POSIX, possibly shared) filesystem: a plain path or a ``file://`` URI."""
    return scheme(path) in (None, "file")


def absolute(path: str | os.PathLike) -> str:
    """The canonical form of ``path``: an absolute local path (what :func:`os.path.abspath` gives, as before;
    a ``file://`` URI becomes its path), or the URI with its scheme in lower case and no trailing or doubled
    slashes (``s3://bucket/a/b``)."""
    text = os.fspath(path)
    kind = scheme(text)
    if kind is None:
        return os.path.abspath(text)
    rest = text[len(kind) + 3 :]
    if kind == "file":
        return os.path.abspath(rest or "/")
    authority = rest.split("/", 1)[0]
    if "@" in authority or (kind in _BUCKET_SCHEMES and ":" in authority):
        refuse_credentials(kind, rest)
    parts = [p for p in rest.split("/") if p and p != "."]
    return f"{kind}://" + "/".join(parts)


#: Schemes whose authority is a bucket name, which never holds ``:`` (elsewhere it may be ``host:port``).
_BUCKET_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs"})


def refuse_credentials(kind: str, rest: str) -> None:
    """A URI with credentials in it (``s3://KEY:SECRET@bucket/...``) is refused, with the secret left out of
    the message: they would be copied into logs, ``run.json``, manifests, ledgers and sbatch scripts."""
    after = rest.partition("@")[2].split("/", 1)[0]  # a secret may hold '/', never '@'
    shown = f"{kind}://***@{after}/..." if after else f"{kind}://***"
    raise OptionError(
        f"{shown}: a URI must not hold credentials (they would be written to logs, run.json and manifests); "
        "remove the part before '@' and give them as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (and "
        "AWS_SESSION_TOKEN), or as a profile in ~/.aws/credentials chosen by AWS_PROFILE"
    )


def join(base: str, *names: str) -> str:
    """``base`` joined with ``names`` (``os.path.join`` locally, ``/`` for a URI)."""
    if is_local(base):
        return os.path.join(base, *names)
    return "/".join([base.rstrip("/"), *(n.strip("/") for n in names)])


def split(path: str) -> tuple[str, str]:
    """(directory, name) of ``path``; for a URI the directory keeps the scheme."""
    if is_local(path):
        return os.path.split(path)
    prefix, _, rest = path.rstrip("/").partition("://")
    head, _, tail = rest.rpartition("/")
    return f"{prefix}://{head}", tail


def dirname(path: str) -> str:
    return split(path)[0]


def basename(path: str) -> str:
    return split(path)[1]


def printable(path: str) -> str:
    """``path`` as valid text: a local name that is not UTF-8 (its bytes come from the OS as surrogate escapes,
    which Arrow columns, JSON text and terminals refuse) with those bytes as ``\\xNN``, as Python shows them;
    every other path as it is."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return path


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` with ``/`` separators: what source task ids and positions hash. Local
    paths exactly as :func:`os.path.relpath` gave them before; URIs compare as text under one scheme."""
    if is_local(path) and is_local(root):
        return os.path.relpath(path, root).replace(os.sep, "/")
    base, target = absolute(root), absolute(path)
    if scheme(base) != scheme(target):
        raise ValueError(f"{path} is not under {root}: they are on different filesystems")
    return posixpath.relpath(target.split("://", 1)[1], base.split("://", 1)[1] or "/")


def common_root(paths: list[str]) -> str:
    """The deepest directory that holds every one of ``paths`` (all local, or all URIs of one scheme)."""
    if all(is_local(p) for p in paths):
        return os.path.commonpath(paths)
    kinds = {scheme(p) for p in paths}
    if len(kinds) != 1:
        raise ValueError(f"input paths on different filesystems cannot share a root: {', '.join(paths)}")
    kind = kinds.pop()
    return f"{kind}://" + posixpath.commonpath([p.split("://", 1)[1] for p in paths])


#: scheme://authority -> (filesystem, what the URI holds before the filesystem's own path): ``""`` for s3
#: (its paths are ``bucket/key``), the authority and its slash for schemes whose paths leave it out. Kept
#: for the process that built them: a forked child builds its own (an S3 client's connections are not
#: shared across a fork).
_FILESYSTEMS: dict[str, tuple[Any, str, int]] = {}  # ... and the S3 options' generation it was built with
_OWNER = [os.getpid()]
_INHERITED: list[Any] = []  # a forked child's copies of its parent's filesystems, never used or destroyed
_LOCK = threading.Lock()


def _cached(key: str) -> tuple[Any, str, int] | None:
    with _LOCK:
        if _OWNER[0] != os.getpid():
            _INHERITED.extend(_FILESYSTEMS.values())  # destroying them could close the parent's connections
            _FILESYSTEMS.clear()
            _OWNER[0] = os.getpid()
        return _FILESYSTEMS.get(key)


def _filesystem(text: str) -> tuple[Any, str, str]:
    """(filesystem, prefix, key) of the canonical URI ``text``: ``scheme://`` + prefix + the path inside it."""
    kind = scheme(text)
    rest = text.split("://", 1)[1]
    key = f"{kind}://{rest.split('/', 1)[0]}"
    generation = options_generation() if kind == "s3" else 0
    cached = _cached(key)
    if cached is None or cached[2] != generation:
        if kind == "s3":
            filesystem, prefix = s3_filesystem(rest.split("/", 1)[0]), ""
        else:
            filesystem, prefix = _from_uri(text, str(kind), rest)
        with _LOCK:
            if cached is not None and _FILESYSTEMS.get(key) is cached:
                del _FILESYSTEMS[key]
            cached = _FILESYSTEMS.setdefault(key, (filesystem, prefix, generation))
    return cached[0], cached[1], key


def s3_filesystem(bucket: str) -> Any:
    """A new ``pyarrow.fs.S3FileSystem`` for ``bucket`` with the options in effect (:func:`.s3.s3_options`),
    pyarrow's own retries off (one attempt) so that :mod:`.retry` counts every one."""
    import pyarrow.fs as pafs

    options = s3_options(bucket)
    kwargs: dict[str, Any] = {
        "anonymous": options.anonymous,
        "allow_delayed_open": True,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    }
    if options.endpoint_url:
        kwargs["endpoint_override"] = options.endpoint_url
    for name in ("connect_timeout", "request_timeout"):
        if getattr(options, name) is not None:
            kwargs[name] = getattr(options, name)
    region = options.region
    if region is None and not options.endpoint_url:
        region = _bucket_region(bucket)
    if region:
        kwargs["region"] = region
    try:
        return pafs.S3FileSystem(**kwargs)
    except TypeError:  # a pyarrow before allow_delayed_open: an upload starts with CreateMultipartUpload
        del kwargs["allow_delayed_open"]
        return pafs.S3FileSystem(**kwargs)


def _bucket_region(bucket: str) -> str | None:
    """The AWS region of ``bucket`` (one unauthenticated request, retried), None when it cannot be learnt
    (the SDK then chooses: the profile's region, or us-east-1)."""
    import pyarrow.fs as pafs

    try:
        return str(call(f"s3://{bucket}", "region", lambda: pafs.resolve_s3_region(bucket)))
    except (OSError, ValueError):
        return None


def _from_uri(text: str, kind: str, rest: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    try:
        filesystem, inner = pafs.FileSystem.from_uri(text)
    except (ValueError, NotImplementedError) as e:  # pyarrow knows no such scheme: try fsspec
        filesystem, inner = _from_fsspec(text, kind, e)
    inner = inner.lstrip("/") if not rest.startswith("/") else inner
    return filesystem, (rest[: len(rest) - len(inner)] if inner and rest.endswith(inner) else "")


def resolve(path: str | os.PathLike) -> tuple[Any, str]:
    """``(pyarrow.fs.FileSystem, path inside it)`` for ``path``. One filesystem object per scheme and
    authority (bucket) per process, so connections are reused. Other fsspec schemes (``gs://``, ``hf://``)
    go through fsspec when it is installed; an unknown scheme is a ValueError naming it."""
    text = absolute(path)
    if scheme(text) is None:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), text
    filesystem, prefix, _ = _filesystem(text)
    rest = text.split("://", 1)[1]
    return filesystem, rest[len(prefix) :] if rest.startswith(prefix) else rest


def uri_of(like: str, inner: str) -> str:
    """The URI of ``inner``, a path inside the filesystem that serves the URI ``like`` (what a listing gives)."""
    text = absolute(like)
    _, prefix, _ = _filesystem(text)
    return f"{scheme(text)}://{prefix}{inner.lstrip('/')}"


def _from_fsspec(text: str, kind: str, why: BaseException) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise ValueError(
            f"{text}: pyarrow has no filesystem for {kind}:// ({why}); install fsspec and the package for "
            f"{kind}:// (e.g. gcsfs, huggingface_hub) to read it through fsspec"
        ) from None
    import pyarrow.fs as pafs

    filesystem, inner = fsspec.core.url_to_fs(text)
    return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem)), inner
