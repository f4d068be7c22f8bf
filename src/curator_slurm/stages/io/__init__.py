"""Readers and writers, one module per format, with their parsers beside them."""
