"""Parsers of outside formats: vLLM startup logs, nvidia-smi output (pure: text in, data out)."""
