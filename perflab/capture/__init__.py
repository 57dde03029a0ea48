"""Everything that touches a GPU, a driver, a profiler or a subprocess."""
