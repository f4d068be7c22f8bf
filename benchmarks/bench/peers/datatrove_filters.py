"""Run datatrove's own filters on a JSONL of documents (run with the Python of a venv holding datatrove 0.10).

    /work/venvs/datatrove/bin/python datatrove_filters.py DOCS.jsonl OUT.json [--lists DIR] [--only NAME,...]

Writes, per filter: the seconds its ``filter`` (or ``format``) took over all documents (one warm-up pass
first, untimed), and per document its result: ``true`` (kept), the reason it was dropped, and for C4 quality
and PII the text afterwards. This file imports datatrove; curator-slurm's benchmark runs it as a subprocess.
"""

import argparse
import json
import os
import sys
import time


def filters(lists: str | None) -> dict:
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        URLFilter,
    )
    from datatrove.pipeline.formatters import PIIFormatter

    out = {
        "GopherQualityFilter": GopherQualityFilter(),
        "GopherRepetitionFilter": GopherRepetitionFilter(),
        "C4QualityFilter": C4QualityFilter(),
        "C4QualityFilter(filter_no_terminal_punct=False)": C4QualityFilter(filter_no_terminal_punct=False),
        "FineWebQualityFilter": FineWebQualityFilter(),
        "PIIFormatter": PIIFormatter(),
    }
    if lists:
        out["URLFilter"] = URLFilter(use_integrated_lists=True)
    return out


def result(step, doc) -> object:
    if hasattr(step, "format"):
        return step.format(doc.text)
    verdict = step.filter(doc)
    if isinstance(verdict, tuple):
        return verdict[1] if not verdict[0] else True
    return bool(verdict) if verdict else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("docs")
    parser.add_argument("out")
    parser.add_argument("--lists", help="run URLFilter with datatrove's integrated lists too")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    from datatrove.data import Document

    with open(args.docs, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    report = {}
    for name, step in filters(args.lists).items():
        if args.only and name not in args.only.split(","):
            continue
        docs = [Document(text=r["text"], id=str(i), metadata={"url": r.get("url", "")}) for i, r in enumerate(rows)]
        for doc in docs[:50]:
            result(step, Document(text=doc.text, id=doc.id, metadata=dict(doc.metadata)))
        started = time.process_time()
        results = []
        for doc in docs:
            verdict = result(step, doc)
            if name.startswith("C4QualityFilter") and verdict is True:
                verdict = {"text": doc.text}
            results.append(verdict)
        report[name] = {"seconds": time.process_time() - started, "results": results}
        print(f"{name}: {report[name]['seconds']:.2f} s", file=sys.stderr)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
