"""Deployment files: what a framework in front of the engines needs to run a layout the plan priced.

One module per framework or layout (the engines' own commands stay in ``engines/``; these wrap them):
``disaggregated.py`` (a prefill and a decode pool's role flags, TensorRT-LLM's disaggregated config and Dynamo's
graph), ``llm_d.py`` (llm-d's ModelService values of two pools), ``dynamo.py`` (Dynamo's expert-parallel graph),
``expert_parallel.py`` (llm-d's LeaderWorkerSet of a wide expert-parallel replica, and which framework deploys
what), ``router_config.py`` (the routers' configuration: llm-d's InferencePool, Dynamo's frontend) and
``manifest.py`` (the one YAML dumper). They sit above ``engines/``, whose launch commands they take, and below
``evaluation/``, whose two-pool result carries a launch.
"""
