"""Hardware and models as data: the GPU catalog (`hardware.yaml`), price sets (`price_sets.yaml`) and the shipped
architectures (`architectures/`).
"""
