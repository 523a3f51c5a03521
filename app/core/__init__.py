"""The pure domain core: takes data, returns data; no I/O, no web, database, template or plot imports.

It imports nothing of ours but itself. ``model_config`` reads a config.json into a ``shape.ModelShape``
(``params`` estimates its weights), ``kvspec`` the KV bytes per token, ``ledger``/``plan`` the per-rank
budget and ``admission`` the blocks and concurrency, ``whatif`` the levers, ``sim`` the simulator.
"""
