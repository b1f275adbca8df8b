"""Fitting: the measured serving runs, the step-cost fit on them, and its validation on held-out campaigns,
models and groups.
"""
