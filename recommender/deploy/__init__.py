"""Deployment files: what a framework in front of the engines needs to run a layout the plan priced.

One module per framework (the engines' own commands stay in ``engines/``; these wrap them): ``dynamo.py``
(Dynamo's graph of an expert-parallel replica or of vLLM prefill and decode pools), ``llm_d.py`` (llm-d's
ModelService values of two pools and its wide-EP LeaderWorkerSet), ``router_config.py`` (the routers'
configuration: llm-d's InferencePool, Dynamo's frontend). Per layout, which framework deploys what:
``disaggregated.py`` (each pool's role flags and TensorRT-LLM's own disaggregated config, then the frameworks'
files) and ``expert_parallel.py``. ``manifest.py`` is the one YAML dumper. They sit above ``engines/``, whose
launch commands they take, and below ``evaluation/``, whose two-pool result carries a launch.
"""
