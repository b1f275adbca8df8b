"""The fleet's router in the deployment files: a routing policy of the fleet simulation (``perf/sim/routing.py``:
round-robin, random, sticky, prefix-aware) as each framework's router settings, so the winner deploys behind the
router its hit rate was counted for.

A plan's prefix-cache hits hold only behind the router that was simulated: behind round-robin a conversation's next
turn finds its history on 1 in N replicas. So the policy is written where each framework sets its router, and where
a framework has no setting for it, the launch says so in words (`Unmapped`), never the nearest setting in its place:

- llm-d: the endpoint picker's (EPP's) plugin configuration, an ``EndpointPickerConfig`` (apiVersion
  ``llm-d.ai/v1alpha1``; the older ``inference.networking.x-k8s.io/v1alpha1`` is still read, "deprecated":
  llm-d/llm-d-inference-scheduler ``pkg/epp/config/loader/configloader.go`` @ 520af478) carried by the InferencePool
  chart's values as ``inferenceExtension.pluginsCustomConfig`` and named by ``pluginsConfigFile`` (llm-d/llm-d
  ``guides/pd-disaggregation/gaie-pd/values.yaml`` @ 126f65d6). Prefix-aware is the scheduler's own P/D sample
  (llm-d-inference-scheduler ``deploy/config/pd-epp-config.yaml @ 520af478``: ``prefix-cache-scorer`` weight 2,
  ``queue-scorer`` weight 1,
  ``max-score-picker``); load-aware is llm-d's default profile (``pkg/epp/config/loader/defaults.go``:
  ``queue-scorer`` 2, ``kv-cache-utilization-scorer`` 2, ``prefix-cache-scorer`` 3); sticky is
  ``session-affinity-scorer`` (``scheduling/scorer/sessionaffinity/session_affinity.go``: score 1 for the pod named
  by the request's ``x-session-token`` header, which the response sets, 0 elsewhere) with the queue scorer placing a
  session's first request; random is ``random-picker``
  (``scheduling/picker/random/picker.go``: a shuffle, "ignoring any scores"). Its pickers are ``max-score-picker``,
  ``random-picker`` and ``weighted-random-picker``: no round-robin. Disaggregated pools get prefill and decode
  profiles (``prefill-filter``/``decode-filter``) under ``disagg-profile-handler`` with ``always-disagg-pd-decider``
  (``scheduling/profilehandler/disagg/``: every request prefilled on the prefill pool, as the plan priced it).
- Dynamo: the Frontend's ``--router-mode`` (``round-robin``, the default, ``random``, ``kv``, ``direct``:
  ai-dynamo/dynamo ``components/src/dynamo/frontend/frontend_args.py`` @ c6b40e78, env ``DYN_ROUTER_MODE`` as its
  examples set it, ``examples/backends/vllm/deploy/disagg_router.yaml`` @ 8401366d). Prefix-aware is ``kv`` with
  ``--no-router-kv-events``: the router predicts each worker's cache from its own routing decisions, as the
  simulation's router does (``agg_router_kv_approx.yaml`` @ d313a268); load-aware is ``kv`` too, its cost being
  load-aware with a prefix bonus already (``lib/kv-router/src/scheduling/selector.rs`` @ 01690d42: logit =
  overlap weight x blocks left to prefill + the worker's decode blocks, lowest wins); its cost weighs the blocks left
  to prefill against the decode load (``--router-kv-overlap-score-weight`` 1.0, ``--router-temperature`` 0.0: the lowest
  cost, deterministically; left at those defaults). No mode keeps a session on one worker: sticky is not mapped.
- A plain Kubernetes Service: no router file; `plain_service_note` says what it gives up, with the fleet
  benchmark's numbers (``benchmarks/fleet_routing.py``, docs/levers.md "Behind a router").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from recommender.deploy.manifest import Manifest, dump

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = [
    "DYNAMO_ROUTER_SOURCES",
    "LLM_D_ROUTER_SOURCES",
    "DynamoRouter",
    "Unmapped",
    "dynamo_router",
    "epp_config",
    "llm_d_router",
    "llm_d_router_values",
    "model_label",
    "model_labels",
    "plain_service_note",
    "routed_graph",
    "with_dynamo_router",
]

LLM_D_ROUTER_SOURCES = [
    "llm-d/llm-d-inference-scheduler deploy/config/pd-epp-config.yaml @ 520af478",
    "llm-d/llm-d-inference-scheduler pkg/epp/config/loader/defaults.go @ 520af478",
    "llm-d/llm-d-inference-scheduler pkg/epp/framework/plugins/scheduling/scorer/sessionaffinity/session_affinity.go "
    "@ 520af478",
    "llm-d/llm-d-inference-scheduler pkg/epp/framework/plugins/scheduling/picker/random/picker.go @ 520af478",
    "llm-d/llm-d guides/pd-disaggregation/gaie-pd/values.yaml @ 126f65d6",
]
DYNAMO_ROUTER_SOURCES = [
    "ai-dynamo/dynamo components/src/dynamo/frontend/frontend_args.py @ c6b40e78",
    "ai-dynamo/dynamo examples/backends/vllm/deploy/agg_router_kv_approx.yaml @ d313a268",
]
#: llm-d's scheduler image; its tag is the user's (the guides pin a release).
LLM_D_SCHEDULER = {"name": "llm-d-inference-scheduler", "hub": "ghcr.io/llm-d", "tag": "${LLM_D_SCHEDULER_VERSION}"}
#: The EPP configuration's file name inside the chart's values.
EPP_CONFIG_FILE = "router-config.yaml"

#: The fleet benchmark's hit rates (docs/levers.md "Behind a router", ``benchmarks/fleet_routing.py``: 4-turn
#: sessions, 4 req/s per replica): one replica, then N = 2, 4, 8 behind round-robin.
_ONE_REPLICA, _ROUND_ROBIN = 0.737, ((2, 0.419), (4, 0.225), (8, 0.109))


@dataclass(frozen=True, slots=True)
class Unmapped:
    """A policy `framework`'s router has no setting for, and why: no router setting is written for it (Dynamo's
    Frontend keeps its default, llm-d gets no router file) and the launch carries `note` instead of a substitute."""

    framework: str
    policy: RoutingPolicy
    reason: str

    @property
    def note(self) -> str:
        return f"{self.framework} has no {self.policy} routing, so no router setting is written for it: {self.reason}"


def _scorers(policy: RoutingPolicy) -> tuple[list[tuple[str, int]], str] | None:
    """The policy's scorers with their weights and its picker (None: llm-d has no picker for it)."""
    if policy == "prefix-aware":
        return [("prefix-cache-scorer", 2), ("queue-scorer", 1)], "max-score-picker"
    if policy == "load-aware":  # llm-d's own default profile (pkg/epp/config/loader/defaults.go @ 520af478)
        return [("queue-scorer", 2), ("kv-cache-utilization-scorer", 2), ("prefix-cache-scorer", 3)], "max-score-picker"
    if policy == "sticky":
        return [("session-affinity-scorer", 100), ("queue-scorer", 1)], "max-score-picker"
    if policy == "random":
        return [], "random-picker"
    return None


def _profile(name: str, role_filter: str | None, picker: str, scorers: list[tuple[str, int]]) -> Manifest:
    refs: list[Manifest] = [{"pluginRef": role_filter}] if role_filter else []
    refs.append({"pluginRef": picker})
    refs += [{"pluginRef": scorer, "weight": weight} for scorer, weight in scorers]
    return {"name": name, "plugins": refs}


def epp_config(policy: RoutingPolicy, *, disaggregated: bool) -> Manifest | Unmapped:
    """llm-d's ``EndpointPickerConfig`` for `policy`: one default profile over aggregated replicas, or prefill and
    decode profiles over disaggregated pools (the session token names the pod that served the response, a decode
    pod, so sticky keeps sessions on decode pods and balances the prefill pool by queue)."""
    chosen = _scorers(policy)
    if chosen is None:
        why = (
            "its endpoint picker's pickers are max-score-picker, random-picker and weighted-random-picker "
            "(llm-d/llm-d-inference-scheduler @ 520af478), none round-robin; plan with random, within a few points "
            "of round-robin's hit rate in the fleet benchmark, or deploy behind a plain Service "
            f"({plain_service_note()})"
        )
        return Unmapped("llm-d", policy, why)
    scorers, picker = chosen
    plugins: list[Manifest] = [{"type": scorer} for scorer, _ in scorers]
    if disaggregated:
        plugins += [{"type": "prefill-filter"}, {"type": "decode-filter"}]
    plugins.append({"type": picker})
    if not disaggregated:
        plugins.append({"type": "single-profile-handler"})
        profiles = [_profile("default", None, picker, scorers)]
    else:
        decider = "always-disagg-pd-decider"
        plugins += [
            {"type": decider},
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": decider}}},
        ]
        prefill = [s for s in scorers if s[0] != "session-affinity-scorer"]
        profiles = [
            _profile("prefill", "prefill-filter", picker, prefill),
            _profile("decode", "decode-filter", picker, scorers),
        ]
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles,
    }


def model_label(model: str) -> str:
    """The model's last path part as a Kubernetes name (lower-case, dashes): a label value and a name's stem."""
    stem = model.rstrip("/").rsplit("/", 1)[-1].lower()
    return "".join(c if c.isalnum() else "-" for c in stem).strip("-")[:40].strip("-") or "model"


def model_labels(model: str) -> dict[str, str]:
    """The labels the router's InferencePool selects a model's serving pods by (llm-d's guides' labels)."""
    return {"llm-d.ai/inference-serving": "true", "llm-d.ai/model": model_label(model)}


def llm_d_router(
    routing: RoutingPolicy | None, *, disaggregated: bool, labels: dict[str, str]
) -> tuple[str, list[str]]:
    """The InferencePool values for `routing` and their notes; ("", []) without a policy, ("", [why]) for a policy
    llm-d has no setting for."""
    if routing is None:
        return "", []
    routed = llm_d_router_values(routing, disaggregated=disaggregated, match_labels=labels)
    if isinstance(routed, Unmapped):
        return "", [routed.note]
    return routed


def llm_d_router_values(
    policy: RoutingPolicy, *, disaggregated: bool, match_labels: dict[str, str]
) -> tuple[str, list[str]] | Unmapped:
    """The InferencePool chart's values putting llm-d's endpoint picker, configured for `policy`, in front of the
    pods carrying `match_labels` (port 8000, vLLM), and the notes that go with it; or why llm-d has no setting."""
    config = epp_config(policy, disaggregated=disaggregated)
    if isinstance(config, Unmapped):
        return config
    document = {
        "inferenceExtension": {
            "replicas": 1,
            "image": dict(LLM_D_SCHEDULER),
            "extProcPort": 9002,
            "pluginsConfigFile": EPP_CONFIG_FILE,
            "pluginsCustomConfig": {EPP_CONFIG_FILE: yaml.safe_dump(config, sort_keys=False)},
        },
        "inferencePool": {
            "targetPorts": [{"number": 8000}],
            "modelServerType": "vllm",
            "modelServers": {"matchLabels": dict(match_labels)},
        },
    }
    notes = [
        f"the {policy} router the plan counted its prefix-cache hits for; install with the Gateway API Inference "
        "Extension's inferencepool chart (-f this file) and route the Gateway's HTTPRoute to its InferencePool; the "
        "scheduler's image tag is your llm-d release",
    ]
    if policy == "sticky":
        notes.append(
            "session affinity keys on the x-session-token header each response carries: clients send it back on a "
            "conversation's next turn, or its turns spread as under random"
        )
    return dump(document), notes


@dataclass(frozen=True, slots=True)
class DynamoRouter:
    """What a policy adds to a DynamoGraphDeployment's ``Frontend`` service: its main container's command and args,
    the service's ``envs``, and a note."""

    mode: str
    args: list[str] = field(default_factory=list)
    note: str = ""


_DYNAMO_MODES: dict[str, str] = {
    "round-robin": "round-robin",
    "random": "random",
    "prefix-aware": "kv",
    "load-aware": "kv",
}


def dynamo_router(policy: RoutingPolicy) -> DynamoRouter | Unmapped:
    """Dynamo's frontend router for `policy` (`Unmapped` for sticky: no mode keeps a session on one worker)."""
    mode = _DYNAMO_MODES.get(policy)
    if mode is None:
        why = (
            "its frontend's --router-mode is round-robin, random, kv or direct (ai-dynamo/dynamo "
            "components/src/dynamo/frontend/frontend_args.py @ c6b40e78), none keeping a session on one worker; "
            "prefix-aware (kv) keeps a conversation's turns where their history is cached, which holds the same hit "
            f"rate as sticky in the fleet benchmark ({_ONE_REPLICA} at every N); the Frontend keeps Dynamo's default, "
            "round-robin"
        )
        return Unmapped("Dynamo", policy, why)
    args = ["-m", "dynamo.frontend", "--router-mode", mode]
    note = (
        f"the Frontend routes {policy} (--router-mode {mode}, ai-dynamo/dynamo components/src/dynamo/frontend/"
        "frontend_args.py @ c6b40e78), the router the plan counted its prefix-cache hits for"
    )
    if mode == "kv":
        args.append("--no-router-kv-events")
        note += (
            "; --no-router-kv-events: the router predicts each worker's cache from what it routed there, as the plan "
            "simulated it (with KV events, each worker's --kv-events-config, it also sees evictions)"
        )
    return DynamoRouter(mode, args, note)


def with_dynamo_router(graph: Manifest, router: DynamoRouter) -> Manifest:
    """`graph` (a DynamoGraphDeployment) with its ``Frontend`` running `router`'s mode: ``python3 -m dynamo.frontend``
    with the mode's args, and ``DYN_ROUTER_MODE`` in its ``envs`` as Dynamo's router examples set it."""
    frontend = graph["spec"]["services"]["Frontend"]
    container = {**frontend["extraPodSpec"]["mainContainer"], "command": ["python3"], "args": list(router.args)}
    routed = {
        **frontend,
        "extraPodSpec": {**frontend["extraPodSpec"], "mainContainer": container},
        "envs": [{"name": "DYN_ROUTER_MODE", "value": router.mode}],
    }
    services = {**graph["spec"]["services"], "Frontend": routed}
    return {**graph, "spec": {**graph["spec"], "services": services}}


def routed_graph(graph: Manifest, routing: RoutingPolicy | None) -> tuple[Manifest, list[str]]:
    """`graph` with its Frontend running `routing`'s router mode, and the note saying so; `graph` unchanged without
    a policy (no note) or for a policy Dynamo has no mode for (the note says why)."""
    if routing is None:
        return graph, []
    router = dynamo_router(routing)
    if isinstance(router, Unmapped):
        return graph, [router.note]
    return with_dynamo_router(graph, router), [router.note]


def plain_service_note(policy: RoutingPolicy | None = None) -> str:
    """What replicas behind a plain Kubernetes Service give up against the router `policy` the plan assumed (None:
    no policy named): the Service picks a pod per connection, so a conversation's turns scatter over the replicas."""
    rates = ", ".join(f"{rate} at N = {n}" for n, rate in _ROUND_ROBIN)
    lost = (
        "a plain Kubernetes Service picks a pod per connection (kube-proxy: at random in iptables mode, round-robin "
        "in IPVS mode), so a conversation's next turn finds its history cached on about 1 in N replicas: in the "
        f"fleet benchmark (4-turn conversations, docs/levers.md) the prefix-cache hit rate is {_ONE_REPLICA} on one "
        f"replica, {rates} round-robin, against {_ONE_REPLICA} at every N sticky or prefix-aware; a prompt prefix "
        "shared by every request survives (each replica misses it once)"
    )
    if policy in ("sticky", "prefix-aware", "load-aware"):
        return f"the plan counted the hits of a {policy} router; {lost}"
    return lost
