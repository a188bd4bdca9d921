"""Benchmark runners behind ``localmem bench``: LoCoMo and LongMemEval evidence recall
at fixed token budgets against baselines, and latency/ingest speed at scale."""
