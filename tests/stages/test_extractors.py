"""HTML extractors on WARC files of real HTML: each page's text is exactly what the library returns for the
documented options; rejected pages are dropped and counted by cause; a page past the time limit is dropped and
counted while the others are extracted; a failed import fails the run with its cause; jusText keeps
non-English pages with their language's stop list."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from curator_slurm import Pipeline
from curator_slurm.extras import MissingExtraError
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME, RunDirError
from curator_slurm.samples.web import _record, http_response
from curator_slurm.stages import (
    HtmlExtractor,
    JsonlWriter,
    JusTextExtractor,
    ResiliparseExtractor,
    TrafilaturaExtractor,
    WarcReader,
)
from support.docfiles import output_rows, run
from support.webfixtures import build_warc, html_root, pages

PYTHON_DOCS, APACHE, HANDBOOK = "python3.11-doc", "apache2-doc", "debian-handbook"


def extract(warc: Path, stage: HtmlExtractor, out: Path) -> tuple[list[dict], dict]:
    """The documents and the summed notes of running WarcReader -> ``stage`` -> JSONL on ``warc``."""
    run(Pipeline("extract").add_stage(WarcReader(warc)).add_stage(stage).add_stage(JsonlWriter(out)))
    counts: dict[str, int] = {}
    for record in iter_records(str(out / DEFAULT_RUN_DIR_NAME)):
        assert record["status"] == "done", record
        for cause, n in record.get("notes", {}).get("counts", {}).items():
            counts[cause] = counts.get(cause, 0) + n
    return sorted(output_rows(out), key=lambda r: r["warc_offset"]), counts


def reference(files: list[Path], one_page) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    """The library's own output for each page, by URL (pages in file order, as the reader reads them)."""
    root = html_root(PYTHON_DOCS)
    return {"https://docs.example/" + str(f.relative_to(root)): one_page(f.read_bytes().decode()) for f in files}


@pytest.fixture(scope="module")
def python_pages() -> list[Path]:
    top = [html_root(PYTHON_DOCS) / name for name in ("about.html", "bugs.html", "copyright.html", "glossary.html")]
    index = [html_root(PYTHON_DOCS) / "genindex-Q.html"]  # an index: links only, which some extractors reject
    return pages(PYTHON_DOCS, "tutorial/*.html", 12) + pages(PYTHON_DOCS, "howto/*.html", 6) + top + index


@pytest.fixture(scope="module")
def python_warc(python_pages: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("python") / "in" / "docs.warc.gz"
    return build_warc(path, sorted(python_pages), html_root(PYTHON_DOCS))


def check_against(warc: Path, files: list[Path], stage: HtmlExtractor, tmp_path: Path, one_page) -> dict:  # type: ignore[no-untyped-def]
    rows, counts = extract(warc, stage, tmp_path / "out")
    expected = reference(sorted(files), one_page)
    kept = {url: text for url, text in expected.items() if text}
    assert {r["url"]: r["text"] for r in rows} == kept
    assert all(set(r) >= {"text", "url", "warc_record_id", "warc_date", "http_status", "warc_offset"} for r in rows)
    assert "html" not in rows[0]
    rejected = len(expected) - len(kept)
    assert sum(n for cause, n in counts.items() if "no text found" in cause) == rejected
    return counts


def test_trafilatura_gives_trafilaturas_own_output_with_fineweb_options(
    python_warc: Path, python_pages: list[Path], tmp_path: Path
) -> None:
    """Each page's text is ``trafilatura.extract(html, favor_precision=True, include_comments=False,
    deduplicate=True)``, its duplicate cache one per source task (here: one fresh cache for the file), with
    whichever Trafilatura is installed (1.x keeps one cache in its module, emptied here; 2.x takes one)."""
    import trafilatura
    from trafilatura import deduplication

    cache: object = True
    if int(trafilatura.__version__.split(".")[0]) >= 2:
        cache = deduplication.LRUCache(maxsize=deduplication.LRU_SIZE)
    else:
        deduplication.LRU_TEST.clear()

    def one(html: str) -> str | None:
        return trafilatura.extract(html, favor_precision=True, include_comments=False, deduplicate=cache)

    check_against(python_warc, python_pages, TrafilaturaExtractor(), tmp_path, one)


def test_resiliparse_gives_resiliparses_own_output(python_warc: Path, python_pages: list[Path], tmp_path: Path) -> None:
    """Each page's text is ``extract_plain_text(html, main_content=True, alt_texts=False)``."""
    from resiliparse.extract.html2text import extract_plain_text

    def one(html: str) -> str:
        return extract_plain_text(html, main_content=True, alt_texts=False)

    check_against(python_warc, python_pages, ResiliparseExtractor(), tmp_path, one)


def nemo_paragraphs(html: str, stop_list: frozenset[str]) -> list:  # type: ignore[type-arg]
    """jusText's paragraphs as NeMo Curator's JusTextExtractor classifies them (its defaults): jusText's steps,
    the context-free classes copied before the context-sensitive revision."""
    import justext
    import lxml.sax

    handler = justext.core.ParagraphMaker()
    lxml.sax.saxify(justext.core.preprocessor(justext.core.html_to_dom(html)), handler)
    paragraphs = handler.paragraphs
    justext.core.classify_paragraphs(paragraphs, stop_list, 70, 200, 0.3, 0.32, 0.2, False)
    for p in paragraphs:
        p.class_type = p.cf_class
    justext.core.revise_paragraph_classification(paragraphs, 200)
    return paragraphs


def test_justext_gives_justexts_own_output_for_english(
    python_warc: Path, python_pages: list[Path], tmp_path: Path
) -> None:
    """Each English page's text is jusText's non-boilerplate paragraphs (English stop list, NeMo's parameters
    and order of steps) joined by blank lines; a page with none is dropped and counted."""
    import justext

    def one(html: str) -> str:
        paragraphs = nemo_paragraphs(html, justext.get_stoplist("English"))
        return "\n\n".join(p.text for p in paragraphs if not p.is_boilerplate)

    check_against(python_warc, python_pages, JusTextExtractor(), tmp_path, one)


#: Pages in other languages: (package, page, CLD2's language, jusText's stop list or None for a non-spaced one).
FOREIGN = [
    (HANDBOOK, "nb-NO/advanced-administration.html", "NORWEGIAN", "Norwegian_Bokmal"),
    (HANDBOOK, "de-DE/sect.apt-get.html", "GERMAN", "German"),
    (HANDBOOK, "ru-RU/sect.apt-get.html", "RUSSIAN", "Russian"),
    (HANDBOOK, "ja-JP/advanced-administration.html", "JAPANESE", None),
    (HANDBOOK, "zh-CN/apt.html", "CHINESE", None),
    (HANDBOOK, "ko-KR/sect.book-structure.html", "KOREAN", None),
    (APACHE, "fr/install.html", "FRENCH", "French"),
    (APACHE, "tr/install.html", "TURKISH", "Turkish"),
    (APACHE, "es/install.html", "SPANISH", "Spanish"),
]


def test_justext_keeps_non_english_pages_with_their_stop_lists(tmp_path: Path) -> None:
    """Norwegian, German, Russian, French, Turkish pages are classified with their own stop lists; Japanese,
    Chinese and Korean pages keep every paragraph (NeMo Curator's rule for non-spaced languages). Each page is
    one document with its language, and its text is jusText's own output for that stop list."""
    import justext

    path = tmp_path / "in" / "foreign.warc.gz"
    path.parent.mkdir()
    # CLD2 calls traditional Chinese "ChineseT", for which NeMo Curator has no stop list: dropped, as there.
    traditional = (HANDBOOK, "zh-TW/basic-configuration.html", "CHINESET", None)
    with open(path, "wb") as f:
        for i, (package, page, _, _) in enumerate([*FOREIGN, traditional]):
            body = (html_root(package) / page).read_bytes()
            f.write(_record("response", f"https://{package}/{page}", http_response(body, "text/html"), i))
    rows, counts = extract(path, JusTextExtractor(), tmp_path / "out")
    by_url = {r["url"]: r for r in rows}
    assert len(rows) == len(FOREIGN), counts
    assert counts == {"jus_text_extractor: no stop list for language CHINESET": 1}
    for package, page, language, stoplist in FOREIGN:
        row = by_url[f"https://{package}/{page}"]
        assert row["language"] == language
        html = (html_root(package) / page).read_bytes().decode()
        paragraphs = nemo_paragraphs(html, justext.get_stoplist(stoplist) if stoplist else frozenset())
        expected = [p.text for p in paragraphs if stoplist is None or not p.is_boilerplate]
        assert row["text"] == "\n\n".join(expected)


def test_page_past_the_time_limit_is_dropped_and_counted_without_stalling(tmp_path: Path) -> None:
    """A pathological page (400,000 paragraphs: Trafilatura needs minutes for it, far more than the 5 s limit,
    however quiet the machine) is dropped and counted with the limit as its cause; the task is done and the
    other pages give what they give alone."""
    huge = "".join(
        f"<p>Paragraph {i} tells of item {i * 7 % 1000} and word {i * 13 % 997}.</p>" for i in range(400_000)
    )
    few = pages(PYTHON_DOCS, "tutorial/*.html", 4)
    plain = build_warc(tmp_path / "plain" / "few.warc.gz", few, html_root(PYTHON_DOCS))
    path = tmp_path / "in" / "slow.warc.gz"
    path.parent.mkdir()
    slow = http_response(f"<html><body><article>{huge}</article></body></html>".encode(), "text/html")
    path.write_bytes(plain.read_bytes() + _record("response", "https://x.example/slow", slow, 0))
    big = 100_000_000  # over the default max_chars: the page must reach the extractor to be timed
    rows, counts = extract(path, TrafilaturaExtractor(time_limit=5.0, max_chars=big), tmp_path / "out")
    assert counts == {"trafilatura_extractor: time limit (5.0 s) expired": 1}
    alone, _ = extract(plain, TrafilaturaExtractor(time_limit=5.0, max_chars=big), tmp_path / "alone")
    assert [r["text"] for r in rows] == [r["text"] for r in alone] and len(rows) == 4


def test_size_cap_drops_and_counts(python_warc: Path, python_pages: list[Path], tmp_path: Path) -> None:
    """Pages longer than max_chars are dropped and counted under that cause; the others are extracted."""
    rows, counts = extract(python_warc, ResiliparseExtractor(max_chars=20_000), tmp_path / "out")
    over = {f.name for f in python_pages if len(f.read_bytes().decode()) > 20_000}
    assert 0 < len(over) < len(python_pages)
    assert counts["resiliparse_extractor: page over max_chars=20000"] == len(over)
    assert not over & {r["url"].rsplit("/", 1)[1] for r in rows}
    assert len(rows) == len(python_pages) - len(over) - sum(n for c, n in counts.items() if "no text" in c)


def test_a_library_that_fails_to_import_fails_the_run_with_its_cause(
    python_warc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An extractor whose library cannot be imported (a dependency missing) fails the run naming the missing
    module: it is not counted page by page as a time-out or a rejection."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "brokenlib.py").write_text("import lxml.html.no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))

    class Broken(HtmlExtractor):
        library = "brokenlib"

        def extract(self, html: str) -> str:
            return html

    with pytest.raises(MissingExtraError) as failed:
        extract(python_warc, Broken(time_limit=0.01), tmp_path / "out")
    assert "lxml.html.no_such_module" in str(failed.value)
    assert "time limit" not in str(failed.value)
    sys.modules.pop("brokenlib", None)


def test_a_run_started_with_another_trafilatura_release_is_refused_naming_both(
    python_warc: Path, tmp_path: Path
) -> None:
    """The extractor's library release is in the run's fingerprint: a run recorded as started under another
    Trafilatura is not resumed under this one; the refusal names both releases."""
    import importlib.metadata
    import json

    from curator_slurm.runs.fingerprint import fingerprint_digest

    out = tmp_path / "out"
    extract(python_warc, TrafilaturaExtractor(), out)
    mine = f"trafilatura {importlib.metadata.version('trafilatura')}"
    other = "trafilatura 1.8.1" if mine != "trafilatura 1.8.1" else "trafilatura 2.0.0"
    record = out / DEFAULT_RUN_DIR_NAME / "run.json"
    run_json = json.loads(record.read_text())
    stage = next(s for s in run_json["pipeline"]["stages"] if s["name"] == "trafilatura_extractor")
    assert stage["params"]["library_version"] == mine
    stage["params"]["library_version"] = other  # as a run started under the other release recorded it
    run_json["fingerprint"] = fingerprint_digest(run_json["pipeline"])
    record.write_text(json.dumps(run_json))
    with pytest.raises(RunDirError, match="library_version") as refused:
        extract(python_warc, TrafilaturaExtractor(), out)
    assert other in str(refused.value) and mine in str(refused.value)
