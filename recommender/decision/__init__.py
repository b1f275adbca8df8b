"""The decision over evaluated candidates: who wins and ties (pure functions in `rules`), what it assumed, and the
recommendation and evidence it writes.
"""
