"""One filesystem layer for every input, output, manifest, shuffle bucket and run-directory path.

A path is a plain local path, a ``file://`` URI, or a URI of a filesystem ``pyarrow.fs`` knows (``s3://``;
other fsspec schemes through fsspec when it is installed). Local paths are served by the ``os`` module and
behave exactly as before (canonical absolute paths, so ids and output names do not change); URIs by
``pyarrow.fs``. Nothing here imports from the rest of the package but its errors.

- :mod:`.paths`: canonical form (:func:`absolute`), :func:`join`, :func:`relative`, :func:`resolve` to a
  ``(pyarrow.fs.FileSystem, path)`` pair.
- :mod:`.files`: :func:`info`/:func:`size`, :func:`open_input` (seekable; ranged reads on object stores),
  :func:`read_range`, :func:`open_decompressed` (by the name's ending, :data:`COMPRESSIONS`), :func:`makedirs`.
- :mod:`.listing`: :func:`list_tree` (sorted, symlinks followed, cycles and repeats reported, skipped names kept).
- :mod:`.publish`: :func:`atomic_write` (temporary name and rename; a whole-object write on object stores),
  :func:`remove_dead_temporaries` (what killed writers on this host left).
"""

from .files import (
    COMPRESSIONS,
    FileInfo,
    compression_of,
    exists,
    info,
    isdir,
    makedirs,
    open_decompressed,
    open_input,
    output_error,
    read_bytes,
    read_range,
    size,
)
from .listing import Listing, describe_names, finished_files, list_tree, matches, name_patterns
from .paths import (
    absolute,
    basename,
    common_root,
    dirname,
    is_local,
    is_uri,
    join,
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

__all__ = [
    "COMPRESSIONS",
    "TMP_MARK",
    "Cleanup",
    "FileInfo",
    "Listing",
    "absolute",
    "atomic_write",
    "atomic_write_text",
    "basename",
    "common_root",
    "compression_of",
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
    "open_decompressed",
    "open_input",
    "output_error",
    "read_bytes",
    "read_range",
    "relative",
    "remove_dead_temporaries",
    "remove_temporaries",
    "resolve",
    "scheme",
    "size",
    "split",
    "temp_name",
    "uri_of",
]
