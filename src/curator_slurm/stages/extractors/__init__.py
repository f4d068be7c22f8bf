"""HTML to text: Trafilatura (FineWeb's choice), Resiliparse (the fast one) and jusText (NeMo Curator's default)."""

from curator_slurm.stages.extractors.base import HtmlExtractor, Rejected, ResiliparseExtractor, TrafilaturaExtractor
from curator_slurm.stages.extractors.justext import JusTextExtractor

__all__ = ["HtmlExtractor", "JusTextExtractor", "Rejected", "ResiliparseExtractor", "TrafilaturaExtractor"]
