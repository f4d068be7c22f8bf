"""NeMo Curator's heuristic filters, by family: characters, words, lines, repetition, substrings."""
