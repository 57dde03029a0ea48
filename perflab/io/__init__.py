"""Importers and exporters of traces."""
