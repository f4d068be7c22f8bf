"""One filesystem layer for every input, output, manifest, shuffle bucket and run-directory path.

A path is a plain local path, a ``file://`` URI, or a URI of a filesystem ``pyarrow.fs`` knows (``s3://``;
other fsspec schemes through fsspec when it is installed). Local paths are served by the ``os`` module and
behave exactly as before (canonical absolute paths, so ids and output names do not change); URIs by
``pyarrow.fs``. Nothing here imports from the rest of the package but its errors and settings.

- :mod:`.paths`: canonical form (:func:`absolute`), :func:`join`, :func:`relative`, :func:`resolve` to a
  ``(pyarrow.fs.FileSystem, path)`` pair, :func:`printable` (a name that is not UTF-8 as valid text).
- :mod:`.files`: :func:`info`/:func:`size`, :func:`open_input` (seekable; ranged reads on object stores),
  :func:`read_range`, :func:`open_decompressed` (by the name's ending, :data:`COMPRESSIONS`), :func:`makedirs`,
  :func:`remove`, :func:`native_source` (a local file as pyarrow's readers take it).
- :mod:`.listing`: :func:`list_tree` (sorted, symlinks followed, cycles and repeats reported, skipped names kept).
- :mod:`.publish`: :func:`atomic_write` (temporary name and rename; a whole-object write on object stores),
  :func:`remove_dead_temporaries` (what killed writers on this host left).
- :mod:`.s3`: how S3 filesystems are configured (:func:`configure_s3`, :func:`s3_options`; the AWS variables
  and files as boto3 reads them), :func:`start_jitter` for array tasks.
- :mod:`.retry` and :mod:`.remote`: every object-store request retried on transient errors with exponential
  backoff and full jitter, permanent ones failing at once naming the URI and the fix; :func:`s3_stats`
  counts them per process.

**Credentials never appear in a path.** A URI that holds them (``s3://KEY:SECRET@bucket/...``, which pyarrow
would accept) is refused by :func:`absolute` with an :class:`~curator_slurm.errors.OptionError` that shows
``***`` in their place and says to use ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` or ``AWS_PROFILE``; no
option of :func:`configure_s3` takes a secret either. So no canonical path, message, log line, manifest or
ledger record the layer produces can hold one.
"""

from .files import (
    COMPRESSIONS,
    FileInfo,
    check_output_dir,
    compression_of,
    exists,
    info,
    isdir,
    makedirs,
    native_source,
    open_decompressed,
    open_input,
    output_error,
    read_bytes,
    read_range,
    remove,
    size,
)
from .listing import Listing, describe_names, finished_files, list_tree, matches, name_patterns, sizes_of
from .paths import (
    absolute,
    basename,
    common_root,
    dirname,
    is_local,
    is_uri,
    join,
    printable,
    relative,
    resolve,
    scheme,
    split,
    uri_of,
)
from .publish import (
    TMP_MARK,
    Cleanup,
    atomic_write,
    atomic_write_text,
    remove_dead_temporaries,
    remove_temporaries,
    temp_name,
)
from .retry import S3RetryError, add_s3_stats, reset_s3_stats, s3_stats
from .s3 import S3Options, configure_s3, reset_s3, s3_options, start_jitter

__all__ = [
    "COMPRESSIONS",
    "TMP_MARK",
    "Cleanup",
    "FileInfo",
    "Listing",
    "S3Options",
    "S3RetryError",
    "absolute",
    "add_s3_stats",
    "atomic_write",
    "atomic_write_text",
    "basename",
    "check_output_dir",
    "common_root",
    "compression_of",
    "configure_s3",
    "describe_names",
    "dirname",
    "exists",
    "finished_files",
    "info",
    "is_local",
    "is_uri",
    "isdir",
    "join",
    "list_tree",
    "makedirs",
    "matches",
    "name_patterns",
    "native_source",
    "open_decompressed",
    "open_input",
    "output_error",
    "printable",
    "read_bytes",
    "read_range",
    "relative",
    "remove",
    "remove_dead_temporaries",
    "remove_temporaries",
    "reset_s3",
    "reset_s3_stats",
    "resolve",
    "s3_options",
    "s3_stats",
    "scheme",
    "size",
    "sizes_of",
    "split",
    "start_jitter",
    "temp_name",
    "uri_of",
]
