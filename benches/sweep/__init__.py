"""The sweep's CLI: ``python -m benches run`` and ``case`` (options, arguments, values,
cli, launch, budget, bycase, summary, outdir, zygote, tree). Imports the engine."""
