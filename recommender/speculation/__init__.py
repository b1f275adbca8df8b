"""Speculative decoding: the methods a search may try, and their acceptance measured on the use case's own text.

`methods.py` names what a spec may ask for; `ngram.py` replays vLLM's n-gram proposer over a greedy
generation; `acceptance.py` measures it on a model; `evaluator.py` caches it per model and scheme.
The simulator's side (steps that verify drafts) is ``perf/sim/speculative.py``.
"""
