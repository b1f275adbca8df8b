"""Where a model comes from: a hub id or a local directory, its config.json and files. The cache that loads each
scheme's model once sits beside the schemes (`quantize/model_cache.py`).
"""
