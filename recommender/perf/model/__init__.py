"""A model's shape and what it occupies on a device: layers, heads, experts, weights, KV cache."""
