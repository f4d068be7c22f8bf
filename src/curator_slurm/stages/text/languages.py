"""Which languages the word splitters here can split: one check, for NeMo Curator's whitespace words and for
datatrove's spaCy English words."""

from __future__ import annotations

from curator_slurm.extras import require

#: Words split on whitespace (``str.split()``): NeMo Curator's for every language but those it segments.
WHITESPACE = "whitespace"
#: Words from spaCy's blank English tokenizer: datatrove's for English (the ``fineweb`` extra).
SPACY_ENGLISH = "spacy_english"
#: NeMo Curator's languages whose words a segmenter splits (jieba, MeCab), not whitespace.
SEGMENTED = {"zh": "Chinese", "ja": "Japanese"}
#: datatrove's names of English.
ENGLISH = ("eng", "en")


def check_language(owner: str, language: str, words: str = WHITESPACE) -> str:
    """``language`` if the filter ``owner`` splits its words as its peer does: with ``words=WHITESPACE``
    (NeMo's ``lang``) any language but Chinese and Japanese; with ``words=SPACY_ENGLISH`` (datatrove's
    ``language``) English only, and spaCy must be installed. A clear error otherwise."""
    parameter = "lang" if words == WHITESPACE else "language"
    if not isinstance(language, str):
        raise TypeError(f"{owner}({parameter}={language!r}): give a language code such as 'en'")
    if words == SPACY_ENGLISH:
        require("spacy", owner, "fineweb")
        if language not in ENGLISH:
            raise ValueError(
                f"{owner}(language={language!r}): only English ('eng', datatrove's default, or 'en') is supported; "
                "datatrove tokenizes other languages with other tokenizers"
            )
        return language
    if language.lower() in SEGMENTED:
        raise ValueError(
            f"{owner}(lang={language!r}): NeMo Curator splits {SEGMENTED[language.lower()]} words with a segmenter "
            "(jieba, MeCab); this package splits words on whitespace only, which would count a whole sentence as "
            "one word. Leave lang='en' only for space-separated languages."
        )
    return language
