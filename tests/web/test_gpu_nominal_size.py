"""A GPU typed as a card's nominal size says what it was read as, through the plan's JSON twin.

/plan?model=llama-3.1-8b&gpu=80GB planned a 74.51 GiB card (80 × 10⁹ B) without a word, 4.68 GiB
below what an H100 80GB reports to vLLM (79.19 GiB): 4.7 GiB less KV for a user who meant the card.
"""

from __future__ import annotations

from .support import TestClient


def _decimal_notes(client: TestClient, gpu: str) -> list[str]:
    notes: list[str] = client.get("/plan.json", params={"model": "llama-3.1-8b", "gpu": gpu}).json()["notes"]
    return [n for n in notes if "GB decimal" in n]


def test_a_nominal_decimal_size_names_the_presets_of_that_size(client: TestClient) -> None:
    (note,) = _decimal_notes(client, "80GB")
    assert note.startswith("GPU total 80,000,000,000 B = 74.51 GiB, read as 80 GB decimal")
    assert "H100 80GB: 79.19 GiB" in note and "A100 80GB: 79.15 GiB" in note


def test_binary_sizes_presets_and_unsold_sizes_say_nothing(client: TestClient) -> None:
    assert _decimal_notes(client, "80GiB") == []
    assert _decimal_notes(client, "H100 80GB") == []
    assert _decimal_notes(client, "75GB") == []
