"""Fleets: the architecture-only plan (`recommender plan`) and its rows, a chosen candidate's launch commands
(`launch.py`); the layouts beyond one aggregated replica in ``layouts/``, the fleet over a day in ``daily/``.
"""
