"""Fleets over a day: replicas hour by hour (``autoscale.py``), the GPU mix as an integer program over length
buckets (``gpu_mix.py``, ``mix_plan.py``, ``length_buckets.py``) and what a search's daily profile adds to its
winner (``winner.py``).
"""
