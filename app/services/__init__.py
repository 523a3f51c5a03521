"""Use cases, no HTTP: what the web wings and the CLI call. Services use core, ingest and db.

- ``plans``: a plan document → the JSON result (levers, allowed TP, start levers, compare).
- ``plan_inputs``: a plan document → the core's input (vLLM's defaults, the one rule; the what-if on top).
- ``plan_terms`` / ``prepared``: what a slider tick reuses (a plan without a base / a stored base), held
  by the web app, bounded, keyed by what each term reads.
- ``model_input`` / ``plan_rows``: the model a plan names (config, catalogue, bytes per token); its rank
  rows (measured, estimated where missing, or estimated whole).
- ``imports``: a startup log or nvidia-smi output → JSON with residuals; a log run → a plan document.
- ``plan_query``: the what-if query string ↔ a plan document (the knob vocabulary).
- ``evidence``: a parsed startup log → a measured plan, checked against the model's config.
- ``base_documents``: stored base documents a what-if URL names by id (memory, then database).
- ``saved_plans``: saving and reopening permanent plan links (recomputed and compared).
- ``deployments``: deployments and ledgers over time (history, diff, alerts, export/import).
- ``ledger_import``: a startup log → a new ledger of a deployment.
- ``demo_data``: migrations plus the demo plans and deployment seeded into an empty database.
- ``simulation`` / ``sim_jobs``: simulation documents, and the in-process job runner for long ramps.
"""
