"""zerograd's report builder: reads a sweep's ``results.jsonl`` and writes self-contained HTML.

Imports nothing else of zerograd: a results directory is all it needs.
"""
