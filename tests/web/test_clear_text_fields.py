"""A blank LoRA-slots / CPU-KV-tier / disk-tier field over a `vllm serve` base clears what the command
sets (`Knob.blank_clears`: the empty value is `key=default`, which removes the base's section / value).
Before, the empty value was dropped and `--enable-lora --max-loras 4 --kv-offloading-size 100` came
back; the canonical URL now states the clearing and reopens the same plan."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from app.web.querystring import clean

from .support import TestClient

SERVE = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --enforce-eager --enable-lora "
         "--max-loras 4 --kv-offloading-size 100")  # fmt: skip


def test_blank_text_fields_clear_a_serve_bases_lora_and_offload(client: TestClient) -> None:
    made = client.post("/api/v1/plan", json={"gpu": {"name": "H100 80GB"}, "serve": SERVE}).json()
    assert made["engine"]["lora"]["max_loras"] == 4 and made["engine"]["kv_offload"]["cpu_bytes"] == 100 * 2**30
    base = made["url"].replace("/plan?", "/plan.json?", 1)
    kept = client.get(base + "&loras=3").json()  # a typed value still edits the base's
    assert kept["engine"]["lora"]["max_loras"] == 3 and kept["engine"]["kv_offload"] is not None
    cleared = client.get(base + "&loras=&offload=").json()
    assert cleared["engine"].get("lora") is None and cleared["engine"].get("kv_offload") is None
    query = dict(parse_qsl(urlsplit(cleared["url"]).query))
    assert query["loras"] == "default" and query["offload"] == "default"
    again = client.get(cleared["url"].replace("/plan?", "/plan.json?", 1)).json()
    assert again["engine"] == cleared["engine"] and again["tokens"] == cleared["tokens"]
    page = client.get(cleared["url"]).text
    assert 'id="f-loras" name="loras" value=""' in page and 'id="f-offload" name="offload" value=""' in page


def test_blank_is_dropped_for_other_text_fields() -> None:
    assert clean([("host_mem", ""), ("loras", " "), ("offload_disk", "")]) == {
        "loras": "default", "offload_disk": "default"}
