"""The model-free read path: candidate pool, scorer, CABLE expansion, packing into a
token budget, and ``reconstruct`` which orchestrates them. Reads the store; never writes.
"""
