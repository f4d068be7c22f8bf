"""HTML -> text: Trafilatura (FineWeb's choice), Resiliparse (the fast one) and jusText (NeMo Curator's default).

Each stage reads the ``html`` field a :class:`~.warc.WarcReader` makes and writes ``text``: exactly what its
library returns for the documented options. A page the library rejects (no text) is dropped; so is a page over
the size cap, one that runs past the per-document time limit, and one the library fails on. Every drop is
counted by its cause in the stage's notes (``status`` shows them beside the funnel), and the first of each
cause is logged with the page's URL. The library is imported when a worker sets the stage up, outside the time
limit, so a broken install fails the run with its real error instead of timing out on every page.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from curator_slurm import extras
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.extractors.language import PageLanguage
from curator_slurm.stages.filters.base import _column
from curator_slurm.stages.notes import add_notes
from curator_slurm.stages.text.compute import filter_table
from curator_slurm.tasks import DocumentBatch


@dataclass(frozen=True)
class Rejected:
    """What :meth:`HtmlExtractor.extract` returns for a page it drops for a reason of its own (counted as
    ``cause``)."""

    cause: str


class TimeLimitExpired(BaseException):
    """A page's extraction ran past the time limit. A BaseException, so a library's ``except Exception``
    cannot swallow it."""


def _expire(signum: int, frame: Any) -> None:
    raise TimeLimitExpired


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TimeLimitExpired` in the block once ``seconds`` of wall time have passed (SIGALRM: the
    block runs in the main thread of its process, as executors' workers do)."""
    if not seconds:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "an HTML extractor's time_limit needs the main thread of its process (SIGALRM); run the stage in a "
            "worker process, or build it with time_limit=None"
        )
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class HtmlExtractor(ProcessingStage[DocumentBatch, DocumentBatch]):
    """The base of HTML extractors: a subclass names its ``library`` (the module to import) and implements
    :meth:`extract` (one page's HTML -> text, or None when the library finds none)."""

    library: ClassVar[str] = ""
    #: Fields a subclass adds beside the text (name -> pyarrow type).
    extra_fields: ClassVar[dict[str, pa.DataType]] = {}

    def __init__(
        self,
        html_field: str = "html",
        text_field: str = "text",
        time_limit: float | None = 5.0,
        max_chars: int | None = 5_000_000,
        keep_html: bool = False,
    ) -> None:
        extras.require(self.library.split(".")[0], type(self).__name__)
        if time_limit is not None and time_limit <= 0:
            raise ValueError(f"{type(self).__name__}(time_limit={time_limit}): give seconds > 0, or None")
        if max_chars is not None and max_chars < 1:
            raise ValueError(f"{type(self).__name__}(max_chars={max_chars}): give a size >= 1, or None")
        self.html_field = html_field
        self.text_field = text_field
        self.time_limit = time_limit
        self.max_chars = max_chars
        self.keep_html = keep_html
        self._module: Any = None
        self._logged: set[str] = set()

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.html_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, self.text_field, *self.extra_fields]

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        self.load()

    def load(self) -> Any:
        """The library, imported on first use (a failed import raises here, with its cause)."""
        if self._module is None:
            self._module = extras.load(self.library, type(self).__name__)
        return self._module

    def begin(self) -> None:
        """Called before the pages of each batch (a source task): reset per-task state."""

    def extract(self, html: str) -> str | tuple[str, dict[str, Any]] | Rejected | None:
        """The text of one page (and the values of ``extra_fields``), or None when the library finds none."""
        raise NotImplementedError

    def process(self, task: DocumentBatch) -> DocumentBatch:
        self.load()
        self.begin()
        pages = _column(task, self.html_field, "extract text from", "html_field").to_pylist()
        urls = task.data.column("url").to_pylist() if "url" in task.data.column_names else [None] * len(pages)
        texts: list[str | None] = []
        extra: dict[str, list[Any]] = {name: [] for name in self.extra_fields}
        keep: list[bool] = []
        counts: dict[str, int] = {}
        for html, url in zip(pages, urls, strict=True):
            text, values, cause = self._one(html, url)
            if cause is not None:
                counts[cause] = counts.get(cause, 0) + 1
            keep.append(cause is None)
            texts.append(text)
            for name in self.extra_fields:
                extra[name].append(values.get(name))
        table = task.data
        columns = {self.text_field: pa.array(texts, pa.string())}
        columns.update({name: pa.array(extra[name], kind) for name, kind in self.extra_fields.items()})
        for name, values in columns.items():
            at = table.column_names.index(name) if name in table.column_names else -1
            table = table.set_column(at, name, values) if at >= 0 else table.append_column(name, values)
        if not self.keep_html and self.html_field != self.text_field:
            table = table.drop_columns([self.html_field])
        out = task.derive(filter_table(table, pa.array(keep, pa.bool_())))
        add_notes(out.metadata, counts)
        return out

    def _one(self, html: str | None, url: str | None) -> tuple[str | None, dict[str, Any], str | None]:
        """(text, extra values, None) for a page kept, (None, {}, cause) for one dropped."""
        if html is None:
            return None, {}, "no HTML (a non-HTML record kept by the reader)"
        if self.max_chars is not None and len(html) > self.max_chars:
            return None, {}, f"page over max_chars={self.max_chars}"
        try:
            with time_limit(self.time_limit):
                result = self.extract(html)
        except TimeLimitExpired:
            return None, {}, self._cause(f"time limit ({self.time_limit} s) expired", url, None)
        except Exception as e:  # counted with its real cause; one sample logged
            return None, {}, self._cause(f"{type(e).__name__} in {self.library.split('.')[0]}", url, e)
        if isinstance(result, Rejected):
            return None, {}, result.cause
        text, values = result if isinstance(result, tuple) else (result, {})
        if not text:
            return None, {}, f"no text found by {self.library.split('.')[0]}"
        return text, values, None

    def _cause(self, cause: str, url: str | None, error: BaseException | None) -> str:
        if cause not in self._logged:
            from loguru import logger

            self._logged.add(cause)
            detail = f": {error!r}" if error is not None else ""
            logger.warning(f"{self.name}: page {url or '?'} dropped, {cause}{detail} (later ones are only counted)")
        return cause


class TrafilaturaExtractor(PageLanguage, HtmlExtractor):
    """Trafilatura's ``extract`` with FineWeb's options (``favor_precision=True, include_comments=False,
    deduplicate=True``; other ``extract`` keywords in ``options``). Trafilatura's duplicate-paragraph cache is
    one per source task (a fresh ``LRUCache`` handed to ``deduplicate``), so a page's text does not depend on
    which pages a worker saw before: shards agree with an unsharded run. Adds ``language`` (the page's, as NeMo
    Curator's extraction names it)."""

    library = "trafilatura"

    def __init__(
        self,
        favor_precision: bool = True,
        include_comments: bool = False,
        deduplicate: bool = True,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        extras.require("lxml_html_clean", type(self).__name__, "web")  # trafilatura 2.x fails to import without
        self.require_cld2(type(self).__name__)
        self.favor_precision = favor_precision
        self.include_comments = include_comments
        self.deduplicate = deduplicate
        self.options = dict(options or {})
        self._cache: Any = None

    def begin(self) -> None:
        if self.deduplicate:
            from trafilatura.deduplication import LRU_SIZE, LRUCache

            self._cache = LRUCache(maxsize=LRU_SIZE)

    def extract(self, html: str) -> tuple[str, dict[str, Any]] | None:
        text = self._module.extract(
            html,
            favor_precision=self.favor_precision,
            include_comments=self.include_comments,
            deduplicate=self._cache if self.deduplicate else False,
            **self.options,
        )
        return self.with_language(text, html)


class ResiliparseExtractor(PageLanguage, HtmlExtractor):
    """Resiliparse's ``extract_plain_text`` with the options NeMo Curator uses (``main_content=True,
    alt_texts=False``; other keywords in ``options``). Adds ``language`` (the page's, as NeMo names it)."""

    library = "resiliparse.extract.html2text"

    def __init__(
        self, main_content: bool = True, alt_texts: bool = False, options: dict[str, Any] | None = None, **kwargs: Any
    ):
        super().__init__(**kwargs)
        self.require_cld2(type(self).__name__)
        self.main_content = main_content
        self.alt_texts = alt_texts
        self.options = dict(options or {})

    def extract(self, html: str) -> tuple[str, dict[str, Any]] | None:
        text = self._module.extract_plain_text(
            html, main_content=self.main_content, alt_texts=self.alt_texts, **self.options
        )
        return self.with_language(text, html)
