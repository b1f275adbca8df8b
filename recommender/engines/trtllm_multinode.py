"""TensorRT-LLM past one node: one ``srun ... trtllm-llmapi-launch trtllm-serve ...`` starts every node of a replica.

TensorRT-LLM does not run one command per node as vLLM and SGLang do: its LLM API starts one MPI process per GPU of
the model's world, and ``trtllm-llmapi-launch`` is "a script that launches the LLM-API code on Slurm-like systems,
and can support multi-node and multi-GPU setups"; "the number of MPI processes should be the same as the model world
size. e.g. For tensor_parallel_size=16, you may use 2 nodes with 8 gpus for each" (NVIDIA/TensorRT-LLM
``examples/llm-api/llm_mgmn_trtllm_serve.sh`` @ b35ac1b6: ``#SBATCH -N 2``, ``--ntasks-per-node=8``, then
``srun ... --mpi=pmix`` running ``trtllm-llmapi-launch trtllm-serve $LOCAL_MODEL --tp_size 16 --host 0.0.0.0``;
"downloading from HF is not supported in Slurm mode"). The replica's command is that: ``srun`` with the replica's
nodes and one task per GPU of a node, around the one-node command's ``trtllm-serve`` (``trtllm.py``), which already
carries ``--tp_size``/``--ep_size`` of the whole replica. Kubernetes users get the same through Dynamo, whose operator
wraps the worker in ``mpirun`` across the nodes (``deploy/expert_parallel.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.engines.expert_parallel import ExpertParallelLaunch

__all__ = ["SOURCE", "slurm_command"]

SOURCE = "NVIDIA/TensorRT-LLM examples/llm-api/llm_mgmn_trtllm_serve.sh @ b35ac1b6"


def slurm_command(serve: list[str], layout: ExpertParallelLaunch) -> tuple[list[str], list[str]]:
    """`serve` (``trtllm-serve MODEL ...``) launched on the replica's nodes, and what the command cannot say."""
    per_node = layout.ep // layout.nodes
    argv = [
        "srun",
        f"--nodes={layout.nodes}",
        f"--ntasks-per-node={per_node}",
        "--mpi=pmix",
        "trtllm-llmapi-launch",
        *serve,
        "--host",
        "0.0.0.0",
    ]
    notes = [
        f"one command starts all {layout.nodes} nodes: run it once inside a Slurm allocation of {layout.nodes} nodes "
        f"x {per_node} GPUs (sbatch -N {layout.nodes} --ntasks-per-node={per_node}), one MPI process per GPU of the "
        f"replica's {layout.ep}; add your cluster's container flags (e.g. --container-image, --container-mounts) to "
        "srun; the first node serves the API on --port.",
        "trtllm-llmapi-launch does not download from Hugging Face: the model must be a directory every node reads "
        f"({SOURCE}).",
    ]
    return argv, notes
