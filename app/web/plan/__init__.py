"""The planning pages and the JSON API: home, plan (sliders, charts, levers), import, compare, docs.

``routes`` (pages and their .json twins) and ``api`` (/api/v1) are the routers; ``views`` turns a
what-if query into a computed plan, ``present`` a result into the page's context, ``charts`` the
plotly figures, ``workflows`` the home/import/compare forms, ``examples`` the home page's examples.
"""
