"""The model layer's write side: cue extraction and grounding, CABLE's antecedent
construction, topics and themes, the worker that runs queued jobs, coverage stats.

Model calls happen outside any transaction; results commit with their job's ``done``.
No SQL here: each step hands its results to one function of ``localmem/storage/``
(``cues``, ``edges``, ``topics``), which decides the transaction and passes every
model-derived change through the door for changes (``localmem/storage/write/changes.py``).
"""
