"""datatrove's quality filters: Gopher, C4 and FineWeb."""
