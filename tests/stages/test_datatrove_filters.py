"""datatrove's filters (``curator_slurm.stages.datatrove``): each rule at its thresholds' boundaries, with
datatrove's reasons, C4's rewritten text, URL and PII cases, through the stages and a pipeline run with an
exclusion writer. The expected decisions are datatrove's documented rules (its docstrings and the Gopher, C4
and FineWeb papers' thresholds), counted over spaCy's blank English words as datatrove counts them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("spacy")

from curator_slurm import DocumentBatch, LocalExecutor, Pipeline, ShardSpec
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, JsonlWriter
from curator_slurm.stages.datatrove import (
    REASON_FIELD,
    C4BadWordsFilter,
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    PIIFormatter,
    SamplerFilter,
    URLFilter,
)
from curator_slurm.stages.text.spacy_words import sentence_counts, words
from curator_slurm.stages.text.split import strings


def batch(texts: list[str], **extra: list[Any]) -> DocumentBatch:
    table = pa.table({"id": list(range(len(texts))), "text": pa.array(texts, pa.string()), **extra})
    return DocumentBatch(task_id="batch-0", data=table, metadata={"files": ["/data/in.jsonl"]}, source_id="src0")


def verdicts(stage: Any, texts: list[str], **extra: list[Any]) -> list[Any]:
    """Per text: True (kept) or the reason it was dropped."""
    task = batch(texts, **extra)
    decision = stage.decide(strings(task.data.column(stage.text_field)), task)
    kept = {row["id"] for row in stage.process(task).data.to_pylist()}
    assert kept == {i for i, k in enumerate(decision.keep) if k}
    return [True if k else decision.reasons[i] for i, k in enumerate(decision.keep)]


def prose(n: int, word: str = "word") -> str:
    """``n`` words, two of them stop words, as one line ending with a full stop."""
    return " ".join(["the", "and", *[word] * (n - 2)]) + "."


# --- words and sentences are spaCy's -----------------------------------------------------------------


def test_words_and_sentences_are_spacys() -> None:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    texts = [
        'Don\'t stop (e.g. now)!! "Yes."  ok',
        "bpo-1: (:func:`x` 's'. 's' a.m. ",
        "Hi.\t,  there...  \n\nnext line  ",
        "",
        "   ",
        "ÉMIGRÉ café, naïve — “quoted” …",
    ]
    w = words(pa.array(texts, pa.large_string()))
    for i, text in enumerate(texts):
        assert w.texts(i) == [t.text.strip() for t in nlp.tokenizer(text) if t.text.strip()]
    counts = sentence_counts(pa.array(texts, pa.large_string()))
    assert counts.tolist() == [len(list(nlp(t).sents)) if t else 1 for t in texts]


def test_sentences_are_spacys_on_real_pages_in_many_scripts() -> None:
    """Real text in 26 translations of one book (Arabic, Chinese, Greek, Japanese, Persian, Russian ...: their
    own punctuation, and chunks without any, which the count takes without spaCy), line by line as C4 counts."""
    import lxml.html
    import spacy

    from support.webfixtures import pages

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    lines = []
    for page in pages("debian-handbook", "*/sect.a*.html"):
        text = lxml.html.parse(str(page)).getroot().text_content()
        lines += [line.strip() for line in text.splitlines() if line.strip()][:40]
    assert len(lines) > 2000
    counts = sentence_counts(pa.array(lines, pa.large_string()))
    assert counts.tolist() == [len(list(nlp(t).sents)) for t in lines]


# --- Gopher quality ----------------------------------------------------------------------------------


def test_gopher_quality_word_count_bounds() -> None:
    f = GopherQualityFilter(max_doc_words=60)
    # The final "." is a symbol word: it does not count.
    assert verdicts(f, [prose(50), prose(49), prose(60), prose(61)]) == [
        True,
        "gopher_short_doc",
        True,
        "gopher_long_doc",
    ]


def test_gopher_quality_mean_word_length_bounds() -> None:
    f = GopherQualityFilter()
    three = prose(50, "abc")  # the, and, abc: exactly 3
    below = three.replace("abc", "ab", 1)
    ten = " ".join(["the", "and", *["abcdefghij"] * 60]) + "."  # mean (6 + 600) / 62 < 10
    long = " ".join(["the", "and", *["abcdefghijklm"] * 60]) + "."
    assert verdicts(f, [three, below, ten, long]) == [
        True,
        "gopher_below_avg_threshold",
        True,
        "gopher_above_avg_threshold",
    ]


def test_gopher_quality_hashes_ellipsis_bullets_alpha_stop_words() -> None:
    f = GopherQualityFilter()
    base = prose(60)  # 61 words with the full stop
    six_hashes = base + " " + " ".join(["#"] * 6)  # 6 / 67 words <= 0.1
    eight_hashes = base + " " + " ".join(["#"] * 8)  # 8 / 69 > 0.1
    ellipses = base + " " + " ".join(["..."] * 8)
    bullets = "\n".join(f"- {prose(10)}" for _ in range(10))  # every line a bullet
    nine_of_ten = "\n".join([*(f"• {prose(10)}" for _ in range(9)), prose(10)])  # 0.9, not above
    end_ellipsis = "\n".join([*(prose(10)[:-1] + "..." for _ in range(4)), *(prose(10) for _ in range(6))])
    numbers = " ".join(["the", "and", *["word"] * 48, *["123"] * 15])  # 50 / 65 with letters < 0.8
    no_stop = " ".join(["word"] * 60) + " the."
    assert verdicts(f, [six_hashes, eight_hashes, ellipses, bullets, nine_of_ten, end_ellipsis, numbers, no_stop]) == [
        True,
        "gopher_too_many_hashes",
        "gopher_too_many_ellipsis",
        "gopher_too_many_bullets",
        True,
        "gopher_too_many_end_ellipsis",
        "gopher_below_alpha_threshold",
        "gopher_enough_stop_words",
    ]


def test_gopher_quality_rules_off() -> None:
    f = GopherQualityFilter(min_doc_words=None, min_stop_words=0)
    assert verdicts(f, ["short text here", "short text."]) == [True, "gopher_below_alpha_threshold"]


# --- Gopher repetition -------------------------------------------------------------------------------


def test_gopher_repetition_paragraphs_lines_and_ngrams() -> None:
    f = GopherRepetitionFilter()
    distinct = [f"paragraph number {i} says something new about topic {i * 7}." for i in range(10)]
    three_of_ten = "\n\n".join(distinct[:7] + distinct[:3])  # 3 / 10 repeated paragraphs: not above 0.3
    four_of_ten = "\n\n".join(distinct[:6] + distinct[:4])
    lines = "\n".join(distinct[:6] + distinct[:4])
    top = " ".join(["alpha beta"] * 30 + [f"w{i}" for i in range(200)])
    dup = " ".join([f"u{i}" for i in range(40)] * 2)
    verdict = verdicts(f, [three_of_ten, four_of_ten, lines, top, dup, ""])
    assert verdict[1] == "dup_para_frac"
    assert verdict[2] == "dup_line_frac"
    assert verdict[3] == "top_2_gram"
    assert verdict[4] == "duplicated_5_n_grams"
    assert verdict[5] == "empty"
    assert verdict[0] in ("dup_para_char_frac", True)  # 3 of 10 paragraphs repeat: > 0.2 of the characters
    assert verdict[0] == "dup_para_char_frac"


# --- C4 quality --------------------------------------------------------------------------------------


def test_c4_quality_rewrites_kept_text() -> None:
    f = C4QualityFilter()
    text = "\n".join(
        [
            "  Menu  ",
            "The first sentence is here. And a second one!",
            "Enable JavaScript to see this page properly.",
            "Read our privacy policy before you go.",
            "Two words.",
            "A citation follows here.[12]",
            "The third one is fine? Yes it is.",
            "An ellipsis ends this line...",
            "A line without an end",
        ]
    )
    task = batch([text])
    out = f.process(task).data.column("text").to_pylist()
    assert out == [
        "The first sentence is here. And a second one!\nA citation follows here.\nThe third one is fine? Yes it is."
    ]


def test_c4_quality_document_rules_and_sentence_minimum() -> None:
    f = C4QualityFilter()
    five = "One two three. Four five six. Seven eight nine.\nTen eleven twelve! Thirteen fourteen fifteen?"
    four = "One two three. Four five six. Seven eight nine.\nTen eleven twelve!"
    lorem = five + "\nLorem ipsum dolor sit amet."
    curly = five + "\nThe code is {x: 1} here."
    curly_in_javascript_line = five + "\nIn JavaScript {x: 1} is an object."
    assert verdicts(f, [five, four, lorem, curly, curly_in_javascript_line]) == [
        True,
        "too_few_sentences",
        "lorem_ipsum",
        "curly_bracket",
        True,
    ]
    assert verdicts(C4QualityFilter(min_num_sentences=-1), [four]) == [True]


def test_c4_quality_fineweb_settings_keep_lines_without_punctuation() -> None:
    f = C4QualityFilter(filter_no_terminal_punct=False)
    text = "A heading without end\nTwo words\nOne two three. Four five six. Seven eight nine. Ten. Eleven more."
    out = f.process(batch([text])).data.column("text").to_pylist()
    assert out == ["A heading without end\nOne two three. Four five six. Seven eight nine. Ten. Eleven more."]


def test_c4_quality_long_word_line() -> None:
    f = C4QualityFilter(min_num_sentences=1, max_word_length=10)
    text = "This line is fine.\nThis has an extraordinarily long word."
    assert f.process(batch([text])).data.column("text").to_pylist() == ["This line is fine."]


# --- FineWeb quality ---------------------------------------------------------------------------------


def test_fineweb_quality_boundaries() -> None:
    f = FineWebQualityFilter()
    long_line = "This line is long enough to be more than thirty characters"
    ended = long_line + "."
    # 1 of 8 lines ends with punctuation: 0.125 >= 0.12; 1 of 9 is 0.111.
    punct_ok = "\n".join([ended, *(f"{long_line} {i}" for i in range(7))])
    punct_low = "\n".join([ended, *(f"{long_line} {i}" for i in range(8))])
    short = "\n".join([ended, "short one.", "short two.", "short three."])  # 3 / 4 short > 0.67
    dup = "\n".join([ended, f"{long_line} again.", ended])
    listy = "\n".join(f"{w}." for w in ["Alpha beta gamma delta epsilon zeta eta theta"] * 1)
    assert verdicts(f, [punct_ok, punct_low, short, dup, "\n \n", listy]) == [
        True,
        "line_punct_ratio",
        "short_line_ratio",
        "char_dup_ratio",
        "empty",
        True,
    ]
    lists = "\n".join(f"Supercalifragilistic expialidocious number {i}." for i in range(10))
    assert verdicts(FineWebQualityFilter(new_line_ratio=0.1), [lists]) == ["list_ratio"]


# --- bad words, URL, PII, sampler --------------------------------------------------------------------


def test_c4_badwords_whole_words_from_local_files(tmp_path: Path) -> None:
    (tmp_path / "en").write_text("badword\nworse thing\n", encoding="utf-8")
    f = C4BadWordsFilter(badwords_dir=tmp_path)
    texts = ["A BadWord here.", "notabadwordish text", "a worse thing.", "clean text"]
    assert verdicts(f, texts) == ["document_removed_with_badwords", True, "document_removed_with_badwords", True]
    missing = C4BadWordsFilter(badwords_dir=tmp_path)
    with pytest.raises(Exception, match="no bad-words list"):
        verdicts(missing, ["x"], language=["de"])
    lenient = C4BadWordsFilter(badwords_dir=tmp_path, fail_on_missing_language=False)
    assert verdicts(lenient, ["badword"], language=["de"]) == [True]


def test_url_filter_rules(tmp_path: Path) -> None:
    pytest.importorskip("tldextract")
    (tmp_path / "domains").write_text("blocked.com\nsub.other.org\n# comment.com\n", encoding="utf-8")
    (tmp_path / "urls").write_text("http://fine.com/exact/page\n", encoding="utf-8")
    (tmp_path / "banned_words.txt").write_text("casino\n", encoding="utf-8")
    (tmp_path / "soft_banned_words.txt").write_text("free\nmoney\nnow\n", encoding="utf-8")
    (tmp_path / "banned_subwords.txt").write_text("xxx\n", encoding="utf-8")
    f = URLFilter(blocklist_dir=tmp_path)
    urls = [
        "https://www.blocked.com/a",
        "https://sub.other.org/x",
        "https://other.org/x",
        "http://fine.com/exact/page",
        "https://fine.com/casino-night",
        "https://fine.com/CASINO",  # words keep their case; banned words are lowercase
        "https://fine.com/free/money",
        "https://fine.com/free/stuff",
        "https://fine.com/aXXXb",
        "https://comment.com/",
    ]
    assert verdicts(f, ["t"] * len(urls), url=urls) == [
        "domain",
        "subdomain",
        True,
        "url",
        "hard_blacklisted",
        True,
        "soft_blacklisted",
        True,
        "blacklisted_subword",
        True,
    ]
    assert verdicts(URLFilter(soft_word_threshold=1, soft_banned_words=["stuff"]), ["t"], url=[urls[7]]) == [
        "soft_blacklisted"
    ]


def test_pii_formatter_replaces_emails_and_public_ips_in_turn() -> None:
    text = "Write to a.b@example.net or c@d.org; servers 8.8.8.8, 10.0.0.1 and 1.1.1.1; not 999.1.1.1."
    out = PIIFormatter().process(batch([text])).data.column("text").to_pylist()
    assert out == [
        "Write to email@example.com or firstname.lastname@example.org; servers 22.214.171.124, 10.0.0.1 and "
        "126.96.36.199; not 9188.8.131.52."  # no word boundary in datatrove's pattern: 99.1.1.1 is an IP
    ]
    assert PIIFormatter(only_remove_public_ips=False).format_texts(pa.array(["10.0.0.1"])).to_pylist() == [
        "22.214.171.124"
    ]


def test_sampler_rate_and_determinism() -> None:
    texts = [f"doc {i}" for i in range(2000)]
    first = verdicts(SamplerFilter(rate=0.3, seed=7), texts)
    again = verdicts(SamplerFilter(rate=0.3, seed=7), texts)
    assert first == again
    kept = sum(v is True for v in first)
    assert 500 < kept < 700
    assert all(v is True for v in verdicts(SamplerFilter(rate=1.0), texts[:10]))
    assert not any(v is True for v in verdicts(SamplerFilter(rate=0.0), texts[:10]))


# --- a pipeline run with exclusion writers -----------------------------------------------------------


def _rows(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(directory.glob("*.jsonl")) for line in p.read_text().splitlines()]


@pytest.mark.parametrize("workers", [1, 2])
def test_pipeline_writes_each_filters_exclusions_once(tmp_path: Path, workers: int) -> None:
    src = tmp_path / "in"
    src.mkdir()
    good = "\n".join(prose(20) for _ in range(3)).replace("word", "words") + "\nA different final line is here."
    docs = [
        {"id": 0, "text": good},
        {"id": 1, "text": "too short."},
        {"id": 2, "text": good + "\nLorem ipsum dolor sit amet."},
        {"id": 3, "text": good.replace("the", "teh")},
    ]
    for part in (0, 1):
        (src / f"part{part}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[part * 2 : part * 2 + 2]))

    def pipeline() -> Pipeline:
        return (
            Pipeline("dt")
            .add_stage(JsonlReader(src, files_per_partition=1))
            .add_stage(GopherQualityFilter(min_doc_words=20, exclusion_writer=JsonlWriter(tmp_path / "x-gopher")))
            .add_stage(C4QualityFilter(min_num_sentences=3, exclusion_writer=JsonlWriter(tmp_path / "x-c4")))
            .add_stage(JsonlWriter(tmp_path / "out"))
        )

    result = pipeline().run(LocalExecutor(workers=workers, retry_backoff=0), shard=ShardSpec.single())
    again = pipeline().run(LocalExecutor(workers=workers, retry_backoff=0), shard=ShardSpec.single())
    assert again.source_tasks_skipped == 2  # the ledger says both are done: nothing is written twice
    assert [r["id"] for r in _rows(tmp_path / "out")] == [0]
    gopher = _rows(tmp_path / "x-gopher")
    c4 = _rows(tmp_path / "x-c4")
    assert sorted((r["id"], r[REASON_FIELD]) for r in gopher) == [
        (1, "gopher_short_doc"),
        (3, "gopher_enough_stop_words"),
    ]
    assert [(r["id"], r[REASON_FIELD]) for r in c4] == [(2, "lorem_ipsum")]
    assert c4[0]["text"] == docs[2]["text"]  # the text as it came in
    # One exclusion file per source task that lost documents, named as that task's output would be.
    out_names = {p.name for p in (tmp_path / "out").glob("*.jsonl")}
    assert {p.name for p in (tmp_path / "x-c4").glob("*.jsonl")} <= out_names | {
        p.name for p in (tmp_path / "x-gopher").glob("*.jsonl")
    }
    assert len(list((tmp_path / "x-gopher").glob("*.jsonl"))) == 2
    # Without the ledger (its run directory gone, the new run clearing the outputs no run records) every source
    # task runs again: the same files, same bytes.
    written = {p: p.read_bytes() for d in ("x-gopher", "x-c4") for p in (tmp_path / d).glob("*.jsonl")}
    shutil.rmtree(tmp_path / "out" / DEFAULT_RUN_DIR_NAME)
    pipeline().run(
        LocalExecutor(workers=workers, retry_backoff=0), shard=ShardSpec.single(), options=RunOptions(clear_output=True)
    )
    assert {p: p.read_bytes() for d in ("x-gopher", "x-c4") for p in (tmp_path / d).glob("*.jsonl")} == written
    funnel = {row.stage: row.dropped for row in result.funnel()}
    assert funnel["gopher_quality_filter"] == 2
    assert funnel["c4_quality_filter"] == 1


# --- the funnel's characters -------------------------------------------------------------------------


def _run(tmp_path: Path, name: str, docs: list[dict[str, Any]], stage: Any) -> tuple[Any, list[dict[str, Any]]]:
    src = tmp_path / f"{name}-in"
    src.mkdir()
    for part in (0, 1):
        rows = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[part::2])
        (src / f"part{part}.jsonl").write_text(rows, encoding="utf-8")
    out = tmp_path / f"{name}-out"
    pipeline = Pipeline(name).add_stage(JsonlReader(src, files_per_partition=1)).add_stage(stage)
    result = pipeline.add_stage(JsonlWriter(out)).run(LocalExecutor(workers=1), shard=ShardSpec.single())
    return result, _rows(out)


def test_the_funnel_counts_c4s_rewriting_and_the_url_filters_pages(tmp_path: Path) -> None:
    import subprocess
    import sys

    from support.helpers import clean_env

    good = "\n".join(prose(12).replace("word", "café") for _ in range(4))
    docs = [
        {"id": 0, "text": good + "\nMenü · Startseite · Kontakt"},  # its last line goes (no terminal punctuation)
        {"id": 1, "text": good + "\nLorem ipsum dolor sit amet, ça va."},  # dropped
        {"id": 2, "text": good},  # kept as it is
        {"id": 3, "text": "  " + good + "\n日本語のテキスト"},  # stripped, last line goes
    ]
    result, out = _run(tmp_path, "c4", docs, C4QualityFilter(min_num_sentences=3))
    kept = {r["id"]: r["text"] for r in out}
    assert sorted(kept) == [0, 2, 3] and kept[2] == good and kept[0] == kept[3] == good
    row = next(r for r in result.funnel() if r.stage == "c4_quality_filter")
    rewritten = sum(len(docs[i]["text"]) - len(kept[i]) for i in kept)
    assert (row.chars_dropped, row.chars_rewritten) == (len(docs[1]["text"]), rewritten)
    assert row.chars_removed == sum(len(d["text"]) for d in docs) - sum(map(len, kept.values()))
    status = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(tmp_path / "c4-out" / DEFAULT_RUN_DIR_NAME)],
        capture_output=True, text=True, env=clean_env(), check=True,
    ).stdout  # fmt: skip
    line = next(x for x in status.splitlines() if x.startswith("  c4_quality_filter"))
    assert line.split()[1:] == ["4", "3", "1", str(row.chars_removed), f"({rewritten}", "by", "rewriting)"]

    pytest.importorskip("tldextract")
    pages = [
        {"id": 0, "url": "https://blocked.com/a", "html": "<p>Blockiert: ÄÖÜ</p>"},
        {"id": 1, "url": "https://fine.org/b", "html": "<p>fine</p>"},
        {"id": 2, "url": "https://www.blocked.com/c", "html": "<html>日本</html>"},
    ]
    result, out = _run(tmp_path, "url", pages, URLFilter(extra_domains=["blocked.com"]))
    assert [r["id"] for r in out] == [1]
    row = next(r for r in result.funnel() if r.stage == "url_filter")
    # Before extraction a document's body is its HTML (datatrove's doc.text then), never its URL.
    assert (row.chars_dropped, row.chars_rewritten) == (len(pages[0]["html"]) + len(pages[2]["html"]), 0)
