"""Performance, below everything else: it imports nothing from the package but the shared leaves (errors,
provenance, input_files, device; the order: docs/architecture.md).

- `catalog/`: GPUs, price sets and model architectures as data;
- `model/`: a model's shape, experts and memory on a device;
- `step/`: step costs (datasheet features, the calibrated fit, intervals, the roofline ceiling);
- `sim/`: continuous batching simulated, closed-loop benchmarks, capacity and P99s;
- `fit/`: the measured serving runs, the fit and its held-out validation;
- `probe.py`: the measured probe of the really quantized model on this machine;
- `pricing.py`: $/1M tokens, replicas and $/month from the hourly price and the capacity, and the tie band.
"""
