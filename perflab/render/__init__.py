"""Model objects to MIME bundles (HTML + text/plain); heavy imports stay inside functions."""
