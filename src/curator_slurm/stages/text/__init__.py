"""Text kernels shared by filters and modifiers: Arrow calls, characters, words, lines, n-grams."""
