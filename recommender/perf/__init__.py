"""Performance: the hardware catalog, the local probe, and the roofline projection."""
