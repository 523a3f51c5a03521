"""The planning pages and the JSON API: home, plan (sliders, charts, levers), import, compare, docs.

``routes`` (pages and their .json twins) and ``api`` (/api/v1) are the routers; ``views`` turns a
what-if query into a computed plan, ``present`` a result into the page's context (with ``form``, the
form's values and options, and ``admission_panel``, the KPIs and admission rows and the core function
behind each), ``charts`` the plotly figures, ``workflows`` the home/import/compare forms, ``examples``
the home page's examples.
"""
