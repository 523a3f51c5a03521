"""The CLI offers no zero-byte uniform budget (seed 001): an operating reserve above every rank's
KV room printed 'uniform budget --kv-cache-memory-bytes 0 (0 B)', a flag that leaves vLLM no memory
for cache blocks; it now says there is none and why."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli import main


def test_the_cli_offers_no_zero_byte_uniform_budget(tmp_path: Path, capsys: object) -> None:
    """A reserve above every rank's room printed 'uniform budget --kv-cache-memory-bytes 0 (0 B)'."""
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"model": {"catalogue": "llama-3.1-8b"},
                               "ranks": [{"total": "80GiB", "kv_room": "50GiB"}],
                               "policy": {"operating_reserve": "60GiB"}}))
    assert main(["plan", str(doc)]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "--kv-cache-memory-bytes 0" not in out
    assert ("uniform budget: none to deploy (the operating reserve (60.00 GiB) leaves rank 0 no KV memory: "
            "its KV room is 50.00 GiB)") in out
