"""Helpers with no knowledge of storage or models: text and token counting, dates, progress, the clock.

Imports nothing of localmem but ``errors``; every other layer may import it.
"""
