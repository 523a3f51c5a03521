"""The pure domain core: takes data, returns data; no I/O, no web, database, template or plot imports."""
