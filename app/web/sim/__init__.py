"""The simulator page (/sim) and its API: ``routes`` is the router, ``form`` reads the form into a
simulation document, ``charts`` draws the concurrency cliff."""
