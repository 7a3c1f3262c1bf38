"""Stand-alone micro-benchmarks: reset speed, clip speed, MFU."""
