"""datatrove's ``URLFilter``: drop documents by their URL, from block lists the user gives (``blocklist_dir``) and
domains from ``tldextract``'s bundled Public Suffix List; nothing is downloaded."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.stages.filters.decide import DatatroveFilter, Decision, first_reason
from curator_slurm.stages.filters.score import DOCUMENT_FIELDS
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.compute import (
    call,
    is_in,
    match_substring,
    re2_literal,
    replace_regex,
    split_pattern_regex,
    to_numpy,
)
from curator_slurm.stages.text.split import explode
from curator_slurm.tasks import DocumentBatch

_tldextract = LazyModule("tldextract")

#: The files of ``blocklist_dir`` and whether their entries are words (normalised) or kept as they are.
LIST_FILES = {
    "domains": "domains",
    "urls": "urls",
    "banned_words": "banned_words.txt",
    "banned_subwords": "banned_subwords.txt",
    "soft_banned_words": "soft_banned_words.txt",
}
_NOT_ALNUM = "[^a-zA-Z0-9]+"


def normalize(word: str) -> str:
    """datatrove's ``normalize``: every non-ASCII-alphanumeric character removed, then lowercased."""
    import re

    return re.sub(_NOT_ALNUM, "", word).lower()


def _entries(lines: Iterable[str], words: bool) -> Iterator[str]:
    return ((normalize(x) if words else x.strip()) for x in lines if x and x[0] != "#")


def parse_list(lines: Iterable[str], words: bool) -> set[str]:
    """datatrove's ``parse_list``: entries not starting with ``#``, normalised (words) or stripped (domains,
    URLs). An empty line of a file is an empty entry, as in datatrove."""
    return set(_entries(lines, words))


def keyed_list(lines: Iterable[str], words: bool) -> dict[str, None]:
    """:func:`parse_list`'s entries as the keys of a dict: a lookup as fast as a set's, and, unlike a set, a
    dict of strings is not tracked by the garbage collector. With datatrove's 4.5 million domains in a set,
    every full collection of the process walks all of them (seconds of a run: tldextract's first call alone,
    building its trie, took 2 s instead of 0.1 s)."""
    return dict.fromkeys(_entries(lines, words))


class URLFilter(DatatroveFilter):
    """datatrove's ``URLFilter``: same matching rules, reasons and ``soft_word_threshold`` default.

    A document goes when its URL's registered domain is a blocked domain (``domain``), its full host is
    (``subdomain``), the URL itself is a blocked URL (``url``), one of its words (the URL split at every run of
    characters other than ASCII letters and digits, case kept) is a banned word (``hard_blacklisted``), at
    least ``soft_word_threshold`` of them are soft-banned words (``soft_blacklisted``), or a banned subword is
    in the URL with those characters removed, lowercased (``blacklisted_subword``). Word lists are
    normalised as datatrove normalises them. The URL is the column ``url_field`` (datatrove's
    ``metadata["url"]``); a document without one fails the batch, as datatrove's assertion does.

    Args:
        soft_word_threshold: the soft-banned words a URL may hold before it goes.
        extra_domains: blocked domains, added to the lists'.
        extra_urls: blocked URLs, added to the lists'.
        banned_words: banned words, added to the lists'.
        banned_subwords: banned subwords, added to the lists'.
        soft_banned_words: soft-banned words, added to the lists'.
        blocklist_dir: a directory of lists named as datatrove names them (``domains``, ``urls``,
            ``banned_words.txt``, ``banned_subwords.txt``, ``soft_banned_words.txt``), e.g. datatrove's unpacked.
        exclusion_writer: a writer for the removed documents (None: none).
        url_field: the column of the URL.
        public_suffix_list: a Public Suffix List file to use instead of the one ``tldextract`` ships.
    """

    requires = ("tldextract",)

    name = "url_filter"
    #: Lists read and the suffix-list extractor built on first use (their files are parameters).
    fingerprint_exclude = frozenset({"_lists", "_extract"})

    def __init__(
        self,
        soft_word_threshold: int = 2,
        extra_domains: Iterable[str] | None = None,
        extra_urls: Iterable[str] | None = None,
        banned_words: Iterable[str] | None = None,
        banned_subwords: Iterable[str] | None = None,
        soft_banned_words: Iterable[str] | None = None,
        blocklist_dir: str | os.PathLike | None = None,
        exclusion_writer: BaseWriter | None = None,
        url_field: str = "url",
        public_suffix_list: str | os.PathLike | None = None,
    ) -> None:
        super().__init__(exclusion_writer, text_field=url_field)
        self.soft_word_threshold = soft_word_threshold
        self.url_field = url_field
        self.extra_domains = sorted(parse_list(extra_domains or (), words=False))
        self.extra_urls = sorted(parse_list(extra_urls or (), words=False))
        self.banned_words = sorted(parse_list(banned_words or (), words=True))
        self.banned_subwords = sorted(parse_list(banned_subwords or (), words=True))
        self.soft_banned_words = sorted(parse_list(soft_banned_words or (), words=True))
        self.blocklist_dir = os.fspath(blocklist_dir) if blocklist_dir is not None else None
        if self.blocklist_dir is not None:
            found = [f for f in LIST_FILES.values() if os.path.isfile(os.path.join(self.blocklist_dir, f))]
            if not found:
                raise FileNotFoundError(
                    f"URLFilter(blocklist_dir={self.blocklist_dir!r}): none of {sorted(LIST_FILES.values())} is "
                    "there (datatrove's lists: unpack its assets/url_filterblacklistsv0_3_0.tar.gz and copy its "
                    "assets/*.txt into one directory)"
                )
        self.public_suffix_list = os.fspath(public_suffix_list) if public_suffix_list is not None else None
        self._lists: dict[str, dict[str, None]] | None = None
        self._extract: Any = None

    def lists(self) -> dict[str, dict[str, None]]:
        """Every list (its entries as keys, :func:`keyed_list`), the files' entries with the ``extra_*`` ones
        (read once per worker)."""
        if self._lists is None:
            extra = {
                "domains": self.extra_domains,
                "urls": self.extra_urls,
                "banned_words": self.banned_words,
                "banned_subwords": self.banned_subwords,
                "soft_banned_words": self.soft_banned_words,
            }
            lists: dict[str, dict[str, None]] = {}
            for key, file in LIST_FILES.items():
                path = os.path.join(self.blocklist_dir, file) if self.blocklist_dir else None
                if path and os.path.isfile(path):
                    with open(path, encoding="utf-8") as f:
                        lists[key] = keyed_list(f, words=key not in ("domains", "urls"))
                else:
                    lists[key] = {}
                lists[key].update(dict.fromkeys(extra[key]))
            self._lists = lists
        return self._lists

    def _extractor(self) -> Any:
        if self._extract is None:
            urls = (f"file://{os.path.abspath(self.public_suffix_list)}",) if self.public_suffix_list else ()
            self._extract = _tldextract.TLDExtract(suffix_list_urls=urls, cache_dir=None, fallback_to_snapshot=True)
        return self._extract

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        urls = texts
        rows = len(urls)
        raw = task.data.column(self.url_field)
        empty = to_numpy(call("equal", urls, "")) | to_numpy(call("is_null", raw))
        if empty.any():
            where = task.where()
            raise InputError(f"{where}: URLFilter: row {int(np.flatnonzero(empty)[0])} has no {self.url_field!r}")
        lists = self.lists()
        domain, host = self._domains(urls.to_pylist())
        blocked = lists["domains"]
        url_set = lists["urls"]
        rules = [
            ("domain", np.fromiter((d in blocked for d in domain), bool, rows)),
            ("subdomain", np.fromiter((h in blocked for h in host), bool, rows)),
            ("url", np.fromiter((u in url_set for u in urls.to_pylist()), bool, rows)),
        ]
        pieces, parents = explode(split_pattern_regex(urls, _NOT_ALNUM))
        rules.append(("hard_blacklisted", _any_in(pieces, parents, lists["banned_words"], rows) > 0))
        soft = _any_in(pieces, parents, lists["soft_banned_words"], rows, distinct=True)
        rules.append(("soft_blacklisted", soft >= self.soft_word_threshold))
        subwords = sorted(w for w in lists["banned_subwords"] if w)
        if subwords:
            squashed = call("utf8_lower", replace_regex(urls, _NOT_ALNUM, ""))
            pattern = "|".join(re2_literal(w) for w in subwords)
            rules.append(("blacklisted_subword", to_numpy(match_substring(squashed, pattern, regex=True))))
        return first_reason(rules, rows)

    def counted_texts(self, task: DocumentBatch, texts: pa.Array) -> pa.ChunkedArray | None:
        """The document's text, or its HTML before extraction (datatrove's ``doc.text`` is the page until an
        extractor replaces it), for the funnel's characters; never the URL."""
        columns = task.data.column_names
        field = next((f for f in DOCUMENT_FIELDS if f in columns), None)
        return task.data.column(field) if field is not None else None

    def _domains(self, urls: list[str]) -> tuple[list[str], list[str]]:
        """(registered domain, full host) of every URL, as tldextract gives them; tldextract's answer depends
        only on the URL's host, so each distinct host is looked up once."""
        netloc = _tldextract.remote.lenient_netloc
        extract = self._extractor()
        hosts = [netloc(u) for u in urls]
        found: dict[str, tuple[str, str]] = {}
        for h in set(hosts):
            r = extract("//" + h)
            registered = f"{r.domain}.{r.suffix}" if r.domain and r.suffix else ""
            found[h] = (registered, r.fqdn)
        return [found[h][0] for h in hosts], [found[h][1] for h in hosts]


def _any_in(
    pieces: pa.Array, parents: np.ndarray, words: dict[str, None], rows: int, distinct: bool = False
) -> np.ndarray:
    """How many of each row's pieces are in ``words`` (with ``distinct``, how many different ones)."""
    if not words or not len(pieces):
        return np.zeros(rows, np.int64)
    hit = to_numpy(is_in(pieces, pa.array(sorted(words), pieces.type)))
    if not distinct:
        return np.bincount(parents[hit], minlength=rows)
    found = pa.table({"row": pa.array(parents[hit]), "word": pieces.filter(pa.array(hit))})
    unique = found.group_by(["row", "word"], use_threads=False).aggregate([])
    return np.bincount(to_numpy(unique.column("row")).astype(np.int64), minlength=rows)


__all__ = ["LIST_FILES", "URLFilter", "keyed_list", "normalize", "parse_list"]
