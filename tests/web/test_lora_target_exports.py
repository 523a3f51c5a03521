"""`--lora-target-modules` goes out the way it came in (defect of stop 29): a pasted `vllm serve` command's
`--lora-target-modules q_proj v_proj` sized the LoRA slots for those modules only, but neither the plan's
flags nor any export wrote it, so the exported command put LoRA on every module, more memory than planned.
Now every format carries it (argparse's nargs="+": one word per module; a YAML list in --config, which
vLLM's `load_config_file` turns back into words, vllm/utils/argparse_utils.py @28be48fa9), and a vLLM
older than the flag (3717a4dd4, taken as v0.18.0) refuses the plan, as vLLM refuses an unknown flag."""

from __future__ import annotations

from typing import Any

import yaml

from app.ingest.vllm_serve import read_serve

from .saved_support import app, backend, client, database_url, settings
from .support import TestClient

__all__ = ["app", "backend", "client", "database_url", "settings"]  # fixtures

SERVE = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --enable-lora --max-loras 2 "
         "--lora-target-modules q_proj v_proj")  # fmt: skip
GPU = {"name": "H100 80GB"}
MODULES = ["q_proj", "v_proj"]


def _plan(client: TestClient, doc: dict[str, Any]) -> dict[str, Any]:
    reply = client.post("/api/v1/plan", json=doc)
    assert reply.status_code == 200, reply.text
    out: dict[str, Any] = reply.json()
    return out


def _after(words: list[str], flag: str) -> list[str]:
    """The words argparse's nargs="+" takes after `flag`: up to the next flag."""
    start = words.index(flag) + 1
    end = next((i for i in range(start, len(words)) if words[i].startswith("-")), len(words))
    return words[start:end]


def test_the_exported_command_reads_back_as_the_same_plan(client: TestClient) -> None:
    first = _plan(client, {"gpu": GPU, "serve": SERVE})
    assert first["engine"]["lora"]["target_modules"] == MODULES
    assert "--lora-target-modules q_proj v_proj" in first["flags"]
    saved = client.post("/api/v1/plans", json={"gpu": GPU, "serve": SERVE})
    assert saved.status_code in (200, 201), saved.text
    command = client.get(f"/p/{saved.json()['slug']}/export/serve").text
    assert read_serve(command).document()["engine"]["lora"]["target_modules"] == MODULES
    again = _plan(client, {"gpu": GPU, "serve": command.replace("\\\n", " ")})
    assert again["engine"]["lora"] == first["engine"]["lora"]
    assert [r["lora_bytes"] for r in again["ranks"]] == [r["lora_bytes"] for r in first["ranks"]]
    assert again["flags"] == first["flags"]


def test_every_deploy_format_carries_the_modules(client: TestClient) -> None:
    slug = client.post("/api/v1/plans", json={"gpu": GPU, "serve": SERVE}).json()["slug"]

    def get(fmt: str) -> Any:
        reply = client.get(f"/p/{slug}/export/{fmt}")
        assert reply.status_code == 200, (fmt, reply.text[:300])
        return yaml.safe_load(reply.text)

    assert get("vllm-config")["lora-target-modules"] == MODULES
    kserve = get("kserve")["spec"]["predictor"]["model"]["args"]
    assert _after(kserve, "--lora-target-modules") == MODULES
    stack = get("production-stack")["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]["extraArgs"]
    assert _after(stack, "--lora-target-modules") == MODULES
    llm_d = get("llm-d")["decode"]["containers"][0]["args"]
    assert _after(llm_d, "--lora-target-modules") == MODULES
    config = client.post("/api/v1/plan", json={"gpu": GPU, "vllm_config": client.get(
        f"/p/{slug}/export/vllm-config").text})  # fmt: skip
    assert config.status_code == 200, config.text
    assert config.json()["engine"]["lora"]["target_modules"] == MODULES


def test_a_vllm_without_the_flag_refuses_the_plan(client: TestClient) -> None:
    old = client.post("/api/v1/plan", json={"gpu": GPU, "serve": SERVE, "vllm_version": "0.17.1"})
    assert old.status_code == 422, old.text
    error = old.json()["error"]
    assert "lora" in error["field"] and "--lora-target-modules" in error["message"]
    assert _plan(client, {"gpu": GPU, "serve": SERVE, "vllm_version": "0.18.0"})["engine"]["lora"]["target_modules"]
    every = _plan(client, {"gpu": GPU, "serve": SERVE.rsplit(" --lora-target-modules", 1)[0], "vllm_version": "0.17.1"})
    assert not any("lora-target-modules" in f for f in every["flags"])
    spaced = client.post("/api/v1/plan", json={"model": {"catalogue": "llama-3.1-8b"}, "gpu": GPU,
                                               "engine": {"lora": {"target_modules": ["q_proj v_proj"]}}})  # fmt: skip
    assert spaced.status_code == 422 and "target_modules" in spaced.json()["error"]["field"]


def test_a_lora_slots_what_if_keeps_the_commands_rank_and_modules(client: TestClient) -> None:
    """`loras=3` over a `vllm serve` base set `engine.lora: {max_loras: 3}`, which replaced the command's
    whole LoRA section (fill_from_serve merges the engine key by key): the what-if lost --max-lora-rank 64
    and --lora-target-modules, and its exported command put rank-16 LoRA on every module."""
    made = _plan(client, {"gpu": GPU, "serve": f"{SERVE} --max-lora-rank 64"})
    assert made["engine"]["lora"]["max_lora_rank"] == 64
    edited = client.get(made["url"].replace("/plan?", "/plan.json?", 1) + "&loras=3")
    assert edited.status_code == 200, edited.text
    lora = edited.json()["engine"]["lora"]
    assert lora == {**made["engine"]["lora"], "max_loras": 3}
    assert "--lora-target-modules q_proj v_proj" in edited.json()["flags"]
