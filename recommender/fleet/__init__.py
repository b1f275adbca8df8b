"""Fleets: the architecture-only plan (`recommender plan`), the replica schedule over a day, the GPU mix as an
integer program, and a chosen candidate's launch commands (`launch.py`).
"""
