"""The records between the report's layers, standard library only: what a sweep wrote (a row
and its parts, run.json), what was judged (verdicts.json, compare.json) and what a page says.
Each file is read by its record's ``from_json``/``read`` and written by its ``to_json``/``write``,
nowhere else. Imports nothing of ours outside this wing."""
