"""The sweep's CLI: ``python -m benches run`` and ``case`` (arguments, cli, bycase,
summary). Imports the engine."""
