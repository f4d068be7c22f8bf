"""NeMo Curator's ``TokenCountFilter``: documents of ``min_tokens`` to ``max_tokens`` tokens of a tokenizer."""

from __future__ import annotations

from typing import Any

from ...extras import load
from .base import DocumentFilter


class TokenCountFilter(DocumentFilter):
    """Keep documents of ``min_tokens`` to ``max_tokens`` tokens, bounds included.

    Args:
        tokenizer: any object with ``encode(text)`` returning the tokens (a Hugging Face tokenizer, ...).
        hf_model_name: instead, a Hugging Face model whose tokenizer is already on this machine (loaded with
            ``transformers``, ``local_files_only=True``: nothing is downloaded).
        hf_token: unused here (NeMo's, for downloading).
        min_tokens: the fewest tokens kept (0: no lower bound).
        max_tokens: the most tokens kept (infinity: no upper bound).
        transformers_init_kwargs: more keyword arguments for ``from_pretrained`` (not ``local_files_only``).
    """

    name = "token_count"

    def __init__(
        self,
        tokenizer: Any = None,
        hf_model_name: str | None = None,
        hf_token: str | None = None,
        min_tokens: int = 0,
        max_tokens: float = float("inf"),
        transformers_init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if tokenizer is None and hf_model_name is None:
            raise ValueError("Either tokenizer or hf_model_name must be provided")
        if tokenizer is not None and hf_model_name is not None:
            raise ValueError("Either tokenizer or hf_model_name must be provided, not both")
        if "local_files_only" in (transformers_init_kwargs or {}):
            raise ValueError("Passing the local_files_only parameter is not allowed")
        self.tokenizer = tokenizer
        self.hf_model_name = hf_model_name
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.transformers_init_kwargs = dict(transformers_init_kwargs or {})

    def load_tokenizer(self) -> None:
        """Load the model's tokenizer from this machine (``ScoreFilter`` calls it once per worker)."""
        if self.hf_model_name is not None and self.tokenizer is None:
            transformers = load("transformers", "TokenCountFilter(hf_model_name=...)")
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                self.hf_model_name, local_files_only=True, **self.transformers_init_kwargs
            )

    def score_document(self, text: str) -> int:
        if self.tokenizer is None:
            self.load_tokenizer()
        return len(self.tokenizer.encode(text))

    def keep_document(self, score: float) -> bool:
        return self.min_tokens <= score <= self.max_tokens


__all__ = ["TokenCountFilter"]
