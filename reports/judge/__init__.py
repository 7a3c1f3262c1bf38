"""Judging: the one reader of rows (pooled into cases), the statistics (scipy underneath), the
verdict words, the leak rule and the targets. Imports the schema wing only."""
