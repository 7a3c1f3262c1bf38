"""The sweep's page (index.html) and verdicts.json: the page's records assembled (``analysis``
with ``runinfo``, ``answer``, ``tables``, ``recipe``, ``profile``), the charts, the templates and
``build``. Imports the schema and judge wings."""
