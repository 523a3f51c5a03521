"""The dashboard and JSON API: ``app.create_app`` builds the app; one wing per page family.

Wings: ``plan`` (home, plan, import, compare, the /api/v1 planning API), ``saved`` (saved plans,
deployments), ``sim`` (the simulator). Shared here: ``deps`` (database, session, write guard),
``errors`` (the error mapping), ``responses``/``htmx``/``templating`` (rendering), ``querystring``
(canonical what-if URLs), ``formatting``, ``assets``, ``limits``, ``headers``, ``cpu``. Routes call
``app.services``; nothing here computes a capacity.
"""
