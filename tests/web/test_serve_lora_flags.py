"""`vllm serve`'s LoRA flags as vLLM's parser reads them (vllm/engine/arg_utils.py @28be48fa9).

- `--lora-target-modules` is `LoRAConfig.target_modules: list[str] | None`: `collection_to_kwargs`
  gives it nargs="+", so `--lora-target-modules q_proj v_proj` is both modules. Before, the reader
  took one word ("v_proj" became "not a flag of vllm serve") and kept the flag as one the plan does not
  model, sizing LoRA on every module; now `engine.lora.target_modules` holds the list (the flag table
  marks every nargs="+" flag "list": scripts/extract_vllm_flags.py), and a --config YAML list too.
- A LoRA rank vLLM refuses (`--max-lora-rank 24`: argparse's choices of MaxLoRARanks) was named
  `engine.lora.max_lora_rank`, a field the user never wrote; now `serve --max-lora-rank`."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from .support import TestClient

LLAMA = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --enable-lora"
SAME = {"Sec-Fetch-Site": "same-origin"}


def _plan(client: TestClient, **doc: object) -> dict[str, object]:
    reply = client.post("/api/v1/plan", json={"gpu": {"name": "H100 80GB"}, **doc})
    assert reply.status_code == 200, reply.text
    out: dict[str, object] = reply.json()
    return out


def test_target_modules_take_every_word_up_to_the_next_flag(client: TestClient) -> None:
    every = _plan(client, serve=LLAMA)
    two = _plan(client, serve=f"{LLAMA} --lora-target-modules q_proj v_proj --max-loras 2")
    engine = two["engine"]
    assert isinstance(engine, dict) and engine["lora"]["target_modules"] == ["q_proj", "v_proj"]
    assert engine["lora"]["max_loras"] == 2  # the flag after the list is still read
    notes = " ".join(str(n) for n in two["notes"])  # type: ignore[attr-defined]
    assert "v_proj" not in notes.replace("q_proj v_proj", "") and "not flags of vllm serve" not in notes
    assert "sized for these modules only" in notes
    lora = [r["lora_bytes"] for r in two["ranks"]]  # type: ignore[attr-defined]
    assert 0 < lora[0] < every["ranks"][0]["lora_bytes"]  # type: ignore[index]
    yaml = _plan(client, vllm_config="model: meta-llama/Llama-3.1-8B-Instruct\nenable-lora: true\n"
                                     "lora-target-modules: [q_proj, v_proj]\nmax-loras: 2\n")  # fmt: skip
    assert yaml["engine"]["lora"] == engine["lora"]  # type: ignore[index]


def test_a_refused_lora_rank_is_named_by_the_flag(
    client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    reply = client.post("/api/v1/plan", json={"gpu": {"name": "H100 80GB"}, "serve": f"{LLAMA} --max-lora-rank 24"})
    assert reply.status_code == 422
    error = reply.json()["error"]
    assert error["field"] == "serve --max-lora-rank" and "got 24" in error["message"]
    page = client.post("/start/serve", data={"command": f"{LLAMA} --max-lora-rank 24", "gpu": "H100 80GB"},
                       headers=SAME)  # fmt: skip
    assert page.status_code == 422 and "(serve --max-lora-rank)" in html.unescape(page.text)
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"gpu": {"name": "H100 80GB"}, "serve": f"{LLAMA} --max-lora-rank 24"}))
    assert main(["plan", str(doc)]) == 2
    assert "serve --max-lora-rank: --max-lora-rank: vLLM" in capsys.readouterr().err
    # a document's own field is still named as the document's
    own = client.post("/api/v1/plan", json={"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"},
                                            "engine": {"lora": {"max_lora_rank": 24}}})  # fmt: skip
    assert own.status_code == 422 and own.json()["error"]["field"] == "engine.lora.max_lora_rank"


def test_other_list_flags_take_their_words() -> None:
    from app.ingest.vllm_serve import read_serve

    reading = read_serve("vllm serve meta-llama/Llama-3.1-8B-Instruct --served-model-name a b --max-model-len 4096")
    assert reading.unknown_flags == [] and reading.engine["max_model_len"] == 4096
    assert [(f["flag"], f["value"]) for f in reading.other_flags] == [("--served-model-name", "a b")]
