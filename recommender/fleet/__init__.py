"""Fleets: the architecture-only plan (`recommender plan`), the replica schedule over a day, and the GPU mix as
an integer program.
"""
