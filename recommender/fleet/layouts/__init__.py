"""Layouts other than aggregated tensor-parallel replicas: disaggregated prefill and decode pools (on one GPU type
or two, at one degree or two), expert parallelism, their search candidates and launches, and the comparisons
`plan` shows beside its rows (aggregated against disaggregated, tensor against expert parallelism, routers).
"""
