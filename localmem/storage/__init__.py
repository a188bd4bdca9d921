"""The SQLite file: connections and migrations, the write path, vector mirrors, read SQL,
the job table's primitives and the model-free turn graph.

Knows nothing of how context is reconstructed or how turns are enriched; the layers
above call into it (util <- models <- storage <- retrieval <- ...).
"""
