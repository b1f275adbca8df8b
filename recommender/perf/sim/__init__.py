"""Simulation: continuous batching replayed step by step, closed-loop benchmarks, capacity per replica and the
user-facing P99s.
"""
