"""The model layer's write side: cue extraction and grounding, CABLE's antecedent
construction, topics and themes, the worker that runs queued jobs, coverage stats.

Model calls happen outside any transaction; results commit with their job's ``done``.
"""
