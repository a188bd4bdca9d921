"""Answers from memory: ``answer`` (reconstruct, then the local model answers) and
``explore`` (MRAgent's active reconstruction loop over the toolkit).
"""
