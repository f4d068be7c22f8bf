"""The benchmark behind ``make bench``; ``benchmarks/run.py`` is its command line."""
