"""Did a change make it worse: asv's results over commits (``history``), two runs compared
(``compare``) and the gate for CI (``gate``). Imports the other wings."""
