"""KV Ledger: per-rank KV-cache capacity planning for vLLM deployments."""

__version__ = "0.1.0"
