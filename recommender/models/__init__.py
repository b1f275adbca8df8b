"""Where a model comes from (hub id, local directory, config.json) and the cache that loads each checkpoint once."""
