"""The command line: one module per command (`main` holds the app, `search` and the small commands); terminal
output lives in `recommender.report`.
"""
