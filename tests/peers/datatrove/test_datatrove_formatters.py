# Ported from datatrove (huggingface/datatrove), tests/pipeline/filters/test_formatters.py at v0.10.0, commit
# 7024aecca2f9ffb7b7cf0d02c0c823b8b24cf664; Apache License 2.0.
"""datatrove's own tests of its formatters, run against this package.

Changed from upstream, and nothing else: the imports (each step is this package's stage with datatrove's calls on
documents, support.datatrove_peer); upstream's ``require_*`` marks check this package's optional packages;
tests that cannot pass here are marked xfail (strict) with the reason, also listed in docs/catalogue.md.
"""

import unittest

from curator_slurm.stages import datatrove as ours
from support.datatrove_peer import Document, datatrove_step

BaseFormatter = datatrove_step(ours.BaseFormatter)
FTFYFormatter = datatrove_step(ours.FTFYFormatter)


class UpperCaseFormatter(BaseFormatter):
    """Concrete formatter for testing the BaseFormatter run() pipeline."""

    name = "🔠 UpperCase"

    def format(self, text: str) -> str:
        return text.upper()


class TestBaseFormatter(unittest.TestCase):
    def test_run_applies_format_and_tracks_stats(self):
        """Verify run() mutates text in-place and counts stats correctly."""
        formatter = UpperCaseFormatter()
        docs = [
            Document(text="hello world", id="1", metadata={"lang": "en"}),
            Document(text="foo bar", id="2"),
        ]
        result = list(formatter.run(iter(docs)))
        assert result[0].text == "HELLO WORLD"
        assert result[1].text == "FOO BAR"
        # Metadata must survive the pipeline
        assert result[0].metadata["lang"] == "en"
        assert formatter.stats["total"].total == 2


class TestFTFYFormatter(unittest.TestCase):
    def test_fixes_mojibake_encoding(self):
        formatter = FTFYFormatter()
        broken = "l\u00e2\u0080\u0099intelligence"
        fixed = formatter.format(broken)
        assert "\u00e2" not in fixed

    def test_removes_control_chars(self):
        formatter = FTFYFormatter()
        assert "\x00" not in formatter.format("hello\x00world")

    def test_preserves_normal_text(self):
        formatter = FTFYFormatter()
        text = "Hello, this is a normal sentence."
        assert formatter.format(text) == text

    def test_unescape_html_entities(self):
        formatter = FTFYFormatter(unescape_html=True)
        fixed = formatter.format("price &gt; 10")
        assert ">" in fixed

    def test_run_pipeline_end_to_end(self):
        formatter = FTFYFormatter()
        doc = Document(text="hello\x00world", id="1")
        result = list(formatter.run(iter([doc])))
        assert "\x00" not in result[0].text


if __name__ == "__main__":
    unittest.main()
