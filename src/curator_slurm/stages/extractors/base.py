"""HTML -> text: Trafilatura (FineWeb's choice), Resiliparse (the fast one) and jusText (NeMo Curator's default),
each reading ``html`` and writing ``text``, every dropped page counted by cause.
Design: docs/design.md, section HTML extraction and its time limit."""

from __future__ import annotations

import importlib.metadata
import inspect
import os
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from curator_slurm import extras
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.extractors.language import PageLanguage
from curator_slurm.stages.extractors.pool import Outcome, PagePool
from curator_slurm.stages.filters.base import _column
from curator_slurm.stages.notes import add_notes
from curator_slurm.stages.text.compute import filter_table
from curator_slurm.tasks import DocumentBatch


@dataclass(frozen=True)
class Rejected:
    """What :meth:`HtmlExtractor.extract` returns for a page it drops for a reason of its own (counted as
    ``cause``)."""

    cause: str


class HtmlExtractor(ProcessingStage[DocumentBatch, DocumentBatch]):
    """The base of HTML extractors: a subclass names its ``library`` (the module to import) and implements
    :meth:`extract` (one page's HTML -> text, or None when the library finds none).

    Args:
        html_field: the field of the page's HTML.
        text_field: the field the text goes to.
        time_limit: seconds a page may take (extracted in a child process that is killed then); None: no limit.
        max_chars: the longest page extracted, in characters; a longer one is dropped (None: no cap).
        keep_html: keep the HTML field beside the text (default: dropped).
    """

    library: ClassVar[str] = ""
    #: Fields a subclass adds beside the text (name -> pyarrow type).
    extra_fields: ClassVar[dict[str, pa.DataType]] = {}
    #: The extraction child and the process that forked it: no part of what the stage produces.
    fingerprint_exclude = frozenset({"_pool", "_pool_owner"})
    #: Whether pages change per-task state that later pages read (Trafilatura's duplicate-paragraph cache): a
    #: child forked again after a page overran is then first given the task's earlier pages.
    keeps_task_state: bool = False

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
        #: The library's release (``"trafilatura 1.11.0"``): in the fingerprint, as another release extracts
        #: other text, so a run is not resumed under another one in silence.
        self.library_version = library_version(self.library)
        self._module: Any = None
        self._logged: set[str] = set()
        self._pool: PagePool | None = None
        self._pool_owner: int | None = None

    def added_fields(self) -> dict[str, pa.DataType]:
        """The fields this extractor adds beside the text (by default ``extra_fields``)."""
        return self.extra_fields

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.html_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, self.text_field, *self.added_fields()]

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
        """The text of one page (and the values of ``added_fields()``), or None when the library finds none."""
        raise NotImplementedError

    def process(self, task: DocumentBatch) -> DocumentBatch:
        self.load()
        pages = _column(task, self.html_field, "extract text from", "html_field").to_pylist()
        urls = task.data.column("url").to_pylist() if "url" in task.data.column_names else [None] * len(pages)
        texts: list[str | None] = [None] * len(pages)
        added = self.added_fields()
        extra: dict[str, list[Any]] = {name: [None] * len(pages) for name in added}
        keep = [False] * len(pages)
        counts: dict[str, int] = {}
        todo = []  # the pages handed to the library: (row, html)
        for row, html in enumerate(pages):
            cause = self._before(html)
            if cause is None:
                todo.append((row, html))
            else:
                counts[cause] = counts.get(cause, 0) + 1
        for (row, _), outcome in zip(todo, self._outcomes([html for _, html in todo]), strict=True):
            text, values, cause = self._result(outcome, urls[row])
            if cause is not None:
                counts[cause] = counts.get(cause, 0) + 1
                continue
            keep[row], texts[row] = True, text
            for name in added:
                extra[name][row] = values.get(name)
        table = task.data
        columns = {self.text_field: pa.array(texts, pa.string())}
        columns.update({name: pa.array(extra[name], kind) for name, kind in added.items()})
        for name, values in columns.items():
            at = table.column_names.index(name) if name in table.column_names else -1
            table = table.set_column(at, name, values) if at >= 0 else table.append_column(name, values)
        if not self.keep_html and self.html_field != self.text_field:
            table = table.drop_columns([self.html_field])
        out = task.derive(filter_table(table, pa.array(keep, pa.bool_())))
        add_notes(out.metadata, counts)
        return out

    def _before(self, html: str | None) -> str | None:
        """Why a page is not handed to the library at all (None: it is)."""
        if html is None:
            return "no HTML (a non-HTML record kept by the reader)"
        if self.max_chars is not None and len(html) > self.max_chars:
            return f"page over max_chars={self.max_chars}"
        return None

    def _outcomes(self, pages: list[str]) -> list[Outcome]:
        """What the library made of each page: in this process without a time limit; with one, in the child
        process of :class:`PagePool`, which is killed (and forked again) when a page overruns."""
        if not self.time_limit:
            self.begin()
            return [_in_process(self, html) for html in pages]
        if self._pool is None or self._pool_owner != os.getpid():  # a forked worker makes its own child
            self._pool, self._pool_owner = PagePool(self, self.time_limit), os.getpid()
        done: list[Outcome] = []

        def replay(upto: int) -> list[str]:  # the pages before upto that shaped per-task state, for a new child
            return [pages[k] for k in range(upto - 1) if done[k].kind == "ok"] if self.keeps_task_state else []

        try:
            for _, outcome in self._pool.run(pages, replay):
                done.append(outcome)
        except BaseException:  # a stop signal's grace expired, or the child could not start: leave no child
            self._pool.kill()
            raise
        return done

    def _result(self, outcome: Outcome, url: str | None) -> tuple[str | None, dict[str, Any], str | None]:
        """(text, extra values, None) for a page kept, (None, {}, cause) for one dropped."""
        library = self.library.split(".")[0]
        if outcome.kind == "timeout":
            return None, {}, self._cause(f"time limit ({self.time_limit} s) expired", url, None)
        if outcome.kind == "died":
            return None, {}, self._cause(f"extraction process died on the page ({outcome.value})", url, None)
        if outcome.kind == "error":
            name, detail = outcome.value
            return None, {}, self._cause(f"{name} in {library}", url, detail)
        result = outcome.value
        if isinstance(result, Rejected):
            return None, {}, result.cause
        text, values = result if isinstance(result, tuple) else (result, {})
        if not text:
            return None, {}, f"no text found by {library}"
        return text, values, None

    def teardown(self) -> None:
        if self._pool is not None and self._pool_owner == os.getpid():
            self._pool.kill()
        self._pool = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_module=None, _pool=None, _pool_owner=None)  # a module and a child process do not pickle
        return state

    def _cause(self, cause: str, url: str | None, error: str | None) -> str:
        if cause not in self._logged:
            from loguru import logger

            self._logged.add(cause)
            detail = f": {error}" if error is not None else ""
            logger.warning(f"{self.name}: page {url or '?'} dropped, {cause}{detail} (later ones are only counted)")
        return cause


def library_version(library: str) -> str:
    """``"<distribution> <release>"`` of the package that holds module ``library`` (``"?"`` for the release
    when it is installed without metadata)."""
    top = library.split(".")[0]
    try:
        return f"{top} {importlib.metadata.version(top)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{top} ?"


def _in_process(stage: HtmlExtractor, html: str) -> Outcome:
    try:
        return Outcome("ok", stage.extract(html))
    except Exception as e:  # counted with its real cause; one sample logged
        return Outcome("error", (type(e).__name__, repr(e)[:500]))


class TrafilaturaExtractor(PageLanguage, HtmlExtractor):
    """Trafilatura's ``extract`` with FineWeb's options (``favor_precision=True, include_comments=False,
    deduplicate=True``; other ``extract`` keywords in ``options``), with Trafilatura 1.x (from 1.8: FineWeb's and
    datatrove's) or 2.x, whichever is installed. Trafilatura's duplicate-paragraph cache is one per source task
    (2.x: a fresh ``LRUCache`` handed to ``deduplicate``; 1.x, whose cache is the module's own: that cache
    emptied), so a page's text does not depend on which pages a worker saw before: shards agree with an
    unsharded run. ``add_language=True`` adds ``language`` (the page's, as NeMo Curator's extraction names it;
    datatrove's Trafilatura adds none, nor does this by default).

    Args:
        favor_precision: Trafilatura's ``favor_precision``.
        include_comments: Trafilatura's ``include_comments``.
        deduplicate: drop paragraphs already seen in the source task (Trafilatura's ``deduplicate``).
        options: other keywords of ``trafilatura.extract`` (checked against the installed release's when the
            stage is set up).
        add_language: add the page's language (CLD2) as ``language``.
        **kwargs: :class:`HtmlExtractor`'s.
    """

    library = "trafilatura"

    def __init__(
        self,
        favor_precision: bool = True,
        include_comments: bool = False,
        deduplicate: bool = True,
        options: dict[str, Any] | None = None,
        add_language: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        extras.require("lxml_html_clean", type(self).__name__, "web")  # trafilatura fails to import without
        self.language_on(add_language)
        self.favor_precision = favor_precision
        self.include_comments = include_comments
        self.deduplicate = deduplicate
        self.options = dict(options or {})
        self._cache: Any = None

    @property
    def keeps_task_state(self) -> bool:  # type: ignore[override]
        return self.deduplicate

    def load(self) -> Any:
        fresh = self._module is None
        module = super().load()
        if fresh:
            taken = set(inspect.signature(module.extract).parameters)
            unknown = sorted(set(self.options) - taken)
            if unknown:
                raise ValueError(
                    f"TrafilaturaExtractor(options=...): {unknown} are not keywords of trafilatura.extract in "
                    f"{self.library_version}; it takes {sorted(taken - {'filecontent'})}"
                )
        return module

    def begin(self) -> None:
        if not self.deduplicate:
            return
        from trafilatura import deduplication

        if not _takes_cache(self._module):
            deduplication.LRU_TEST.clear()  # 1.x: the module's one cache, which deduplicate=True uses
            self._cache = True
        else:
            self._cache = deduplication.LRUCache(maxsize=deduplication.LRU_SIZE)

    def extract(self, html: str) -> str | tuple[str, dict[str, Any]] | None:
        if self.deduplicate and self._cache is None:
            self.begin()
        text = self._module.extract(
            html,
            favor_precision=self.favor_precision,
            include_comments=self.include_comments,
            deduplicate=self._cache if self.deduplicate else False,
            **self.options,
        )
        return self.with_language(text, html)


def _takes_cache(trafilatura: Any) -> bool:
    """Whether this Trafilatura's ``deduplicate`` takes a cache object (2.x) rather than only a bool (1.x)."""
    return int(str(trafilatura.__version__).split(".")[0]) >= 2


class ResiliparseExtractor(PageLanguage, HtmlExtractor):
    """Resiliparse's ``extract_plain_text`` with the options NeMo Curator uses (``main_content=True,
    alt_texts=False``; other keywords in ``options``). ``add_language=True`` adds ``language`` (the page's, as NeMo
    names it).

    Args:
        main_content: keep only the main content (Resiliparse's ``main_content``).
        alt_texts: keep images' alt texts (Resiliparse's ``alt_texts``).
        options: other keywords of ``extract_plain_text``.
        add_language: add the page's language (CLD2) as ``language``.
        **kwargs: :class:`HtmlExtractor`'s.
    """

    library = "resiliparse.extract.html2text"

    def __init__(
        self,
        main_content: bool = True,
        alt_texts: bool = False,
        options: dict[str, Any] | None = None,
        add_language: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.language_on(add_language)
        self.main_content = main_content
        self.alt_texts = alt_texts
        self.options = dict(options or {})

    def extract(self, html: str) -> str | tuple[str, dict[str, Any]] | None:
        text = self._module.extract_plain_text(
            html, main_content=self.main_content, alt_texts=self.alt_texts, **self.options
        )
        return self.with_language(text, html)
