"""The character sets datatrove's filters count with (its punctuation and terminal punctuation, as code-point
ranges), and Arrow helpers that split text the way Python does (Python's whitespace spelled out for RE2)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.stages.text.compute import RE2_SPACE, call, replace_regex, split_pattern_regex, to_numpy


def _chars(*ranges: int | tuple[int, int]) -> frozenset[str]:
    out: set[str] = set()
    for r in ranges:
        low, high = (r, r) if isinstance(r, int) else r
        out.update(chr(c) for c in range(low, high + 1))
    return frozenset(out)


#: datatrove's ``TERMINAL_PUNCTUATION``: the characters that end a sentence in the scripts it covers (close
#: to Unicode's Sentence_Terminal property of an older Unicode, but not equal to it, so listed).
TERMINAL_PUNCTUATION = _chars(
    0x21, 0x2E, 0x3F, 0x589, (0x61D, 0x61F), 0x6D4, (0x700, 0x702), 0x7F9, 0x837, 0x839, (0x83D, 0x83E),
    (0x964, 0x965), (0x104A, 0x104B), 0x1362, (0x1367, 0x1368), 0x166E, (0x1735, 0x1736), (0x17D4, 0x17D6),
    (0x17D9, 0x17DA), 0x1803, 0x1809, (0x1944, 0x1945), (0x1AA8, 0x1AAB), (0x1B5A, 0x1B5B), (0x1B5E, 0x1B5F),
    (0x1B7D, 0x1B7E), (0x1C3B, 0x1C3C), (0x1C7E, 0x1C7F), (0x203C, 0x203D), (0x2047, 0x2049), 0x2E2E, 0x2E3C,
    (0x2E53, 0x2E54), 0x3002, 0xA4FF, (0xA60E, 0xA60F), 0xA6F3, 0xA6F7, (0xA876, 0xA877), (0xA8CE, 0xA8CF),
    0xA92F, (0xA9C8, 0xA9C9), (0xAA5D, 0xAA5F), (0xAAF0, 0xAAF1), 0xABEB, 0xFE52, (0xFE56, 0xFE57), 0xFF01,
    0xFF0E, 0xFF1F, 0xFF61, (0x10A56, 0x10A57), (0x10F55, 0x10F59), (0x10F86, 0x10F89), (0x11047, 0x11048),
    (0x110BE, 0x110C1), (0x11141, 0x11143), (0x111C5, 0x111C6), 0x111CD, (0x111DE, 0x111DF), (0x11238, 0x11239),
    (0x1123B, 0x1123C), 0x112A9, (0x1144B, 0x1144C), (0x115C2, 0x115C3), (0x115C9, 0x115D7), (0x11641, 0x11642),
    (0x1173C, 0x1173E), 0x11944, 0x11946, (0x11A42, 0x11A43), (0x11A9B, 0x11A9C), (0x11C41, 0x11C42),
    (0x11EF7, 0x11EF8), (0x11F43, 0x11F44), (0x16A6E, 0x16A6F), 0x16AF5, (0x16B37, 0x16B38), 0x16B44, 0x16E98,
    0x1BC9F, 0x1DA88,
)  # fmt: skip

#: datatrove's ``PUNCTUATION_SET``: its ASCII and CJK punctuation, the C0 controls but tab and newline, DEL
#: and the C1 controls, plus :data:`TERMINAL_PUNCTUATION`. A word made only of these is a "symbol word".
PUNCTUATION_SET = TERMINAL_PUNCTUATION | _chars(
    (0x0, 0x8), (0xB, 0x1F), (0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x9F), 0xAB, 0xB4, 0xBB,
    (0x2013, 0x2014), 0x2019, (0x201C, 0x201E), 0x2026, 0x2236, 0x2501, 0x25BA, (0x3001, 0x3002),
    (0x3008, 0x300D), (0x3010, 0x3011), 0xFF01, 0xFF05, (0xFF08, 0xFF09), 0xFF0C, 0xFF0E, 0xFF11,
    (0xFF1A, 0xFF1B), 0xFF1F, 0xFF5E,
)  # fmt: skip

#: Where ``str.splitlines`` breaks a line (``\r\n`` is one break).
LINE_BREAK = r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x{85}\x{2028}\x{2029}]"
SPACE_RUN = f"[{RE2_SPACE}]+"


def strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column of texts as one ``large_string`` array without nulls (a null is the empty text)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if pa.types.is_null(values.type):
        values = pa.array([""] * len(values), pa.large_string())
    values = values.cast(pa.large_string())
    return call("coalesce", values, "") if values.null_count else values


def explode(lists: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(the items of a list array, the index of the row each came from)."""
    items = call("list_flatten", lists)
    parents = to_numpy(call("list_parent_indices", lists)).astype(np.int64)
    return items, parents


def split_regex(texts: pa.Array, pattern: str) -> tuple[pa.Array, np.ndarray]:
    """``re.split(pattern, text)`` of every text, flattened: (pieces, row of each piece)."""
    return explode(split_pattern_regex(texts, pattern))


def splitlines(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """``text.splitlines()`` of every text, flattened: (lines, row of each line). Like Python, a text that
    ends with a line break has no empty last line, and the empty text has no lines."""
    lists = split_pattern_regex(texts, LINE_BREAK)
    lines, parents = explode(lists)
    lengths = to_numpy(call("list_value_length", lists)).astype(np.int64)
    ends = np.cumsum(lengths) - 1  # the last piece of each text: Python drops it when it is empty
    last = np.zeros(len(lines), dtype=bool)
    last[ends[lengths > 0]] = True
    empty = to_numpy(call("equal", call("binary_length", lines), 0))
    keep = ~(last & empty)
    if keep.all():
        return lines, parents
    return lines.filter(pa.array(keep)), parents[keep]


def strip(texts: pa.Array) -> pa.Array:
    """``str.strip()`` of every text (Python's whitespace)."""
    return replace_regex(texts, f"^[{RE2_SPACE}]+|[{RE2_SPACE}]+$", "")
