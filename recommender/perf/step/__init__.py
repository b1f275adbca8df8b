"""Step costs: how long one forward pass takes on a GPU, from datasheet features and the calibrated fit, with
intervals.
"""
