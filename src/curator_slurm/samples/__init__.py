"""Sample inputs for the demo, the tests and the benchmarks: a JSONL corpus and WARC files."""
