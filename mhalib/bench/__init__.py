"""Benchmark of the attention implementations (used by ``mhalib bench``).

Import :func:`mhalib.bench.runner.run_benchmark` and :func:`mhalib.bench.report.format_rows`
directly; this package's import stays free of torch so the CLI starts fast.
"""
