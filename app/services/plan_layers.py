"""The plan's issue-15 layers, from a validated document to the core's inputs: KV offload tiers
(app.core.kv_tiers), the node, prefix caching (app.core.prefix_pool) and the DP/EP layout
(app.core.dp_layout). `app.services.plans` calls these while it builds a plan."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.core.dp_layout import DPLayout, check_dp_layout
from app.core.errors import InputError
from app.core.kv_tiers import KVOffload, Node, check_offload
from app.core.plan import Layout, ModelInput
from app.core.prefix_pool import default_prefix_caching
from app.core.versions import rules_for
from app.schemas import PlanDocument

JSON = dict[str, Any]


def kv_offload(doc: PlanDocument, version: str) -> KVOffload | None:
    """`engine.kv_offload` as the core's tier input, refused where vLLM at `version` refuses it."""
    spec = doc.engine.kv_offload
    if spec is None:
        return None
    offload = KVOffload(spec.backend, spec.cpu_bytes, spec.disk_bytes, spec.chunk_size)
    rules = rules_for(version)
    check_offload(offload, rules.version, rules.label)
    return offload


def make_dp_layout(layout: Layout, model: ModelInput, version: str) -> DPLayout:
    """The DP/EP layout (app.core.dp_layout), refused where vLLM at `version` has no such flag."""
    experts = model.shape.num_experts if model.shape is not None else None
    out = DPLayout(layout.dp, layout.tp, layout.pp, layout.expert_parallel, experts)
    rules = rules_for(version)
    check_dp_layout(out, rules.version, rules.label)
    return out


def prefix_caching(doc: PlanDocument, version: str) -> bool:
    given = doc.engine.enable_prefix_caching
    return default_prefix_caching(rules_for(version).version) if given is None else given


def node(doc: PlanDocument) -> Node | None:
    spec = doc.node
    if spec is None:
        return None
    if spec.host_memory_bytes is not None and spec.host_memory_bytes <= 0:
        raise InputError("node.host_memory_bytes", "must be above 0 (the host's memory, e.g. '1 TiB')")
    return Node(spec.host_memory_bytes, spec.gpus_per_node, spec.host_link)


_CONNECTORS = {"LMCacheConnectorV1": "lmcache", "LMCacheMPConnector": "lmcache", "OffloadingConnector": "native",
               "SimpleCPUOffloadConnector": "native"}
_CPU_BYTES = re.compile(r"['\"]cpu_bytes_to_use(_per_rank)?['\"]\s*:\s*(\d+(?:\.\d+)?)")


def logged_offload(run: Mapping[str, Any], workers: int) -> tuple[JSON | None, str | None]:
    """The KV offload tier a log's non-default args state, as `engine.kv_offload`, or a note saying
    what the log leaves unknown: `kv_offloading_size` (GiB, the engine's total) and `kv_offloading_backend`
    (vLLM ≥ 0.11.1), else a `kv_transfer_config` naming an offloading connector (`cpu_bytes_to_use`, or
    `cpu_bytes_to_use_per_rank` × TP × PP workers, vllm/v1/kv_offload/cpu/spec.py and
    simple_cpu_offload_connector.py @28be48fa; LMCache keeps its size in its own configuration)."""
    args = (run.get("settings") or {}).get("non_default_args")
    if not isinstance(args, Mapping):
        return None, None
    size = args.get("kv_offloading_size")
    if isinstance(size, int | float) and not isinstance(size, bool) and size > 0:
        backend = args.get("kv_offloading_backend")
        return {"backend": backend if backend in ("native", "lmcache") else "native",
                "cpu_bytes": int(float(size) * 2**30)}, None
    config = str(args.get("kv_transfer_config") or "")
    connector = next((c for c in _CONNECTORS if c in config), None)
    if connector is None:
        return None, None
    match = _CPU_BYTES.search(config)
    if match is None:
        return None, (f"the run offloads KV through {connector} (kv_transfer_config); its size is not in the log "
                      "(LMCache reads it from its own configuration): give engine.kv_offload to see the tier")
    total = float(match[2]) * (workers if match[1] else 1)
    return {"backend": _CONNECTORS[connector], "cpu_bytes": int(total)}, None
