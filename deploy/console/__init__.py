"""The web console (``pocketmq console -n NAMESRV``, or ``pocketmq up --console``).

The pages rocketmq-dashboard users know (dashboard, cluster, topics, consumer groups, producers,
messages, DLQ messages, message traces, ACL) served by aiohttp: ``server.ConsoleServer`` (the
application: static pages + ``api`` and ``api_more`` routes over one
:class:`~pocketmq.client.admin.MQAdmin`, and the ``volume`` sampler behind the Dashboard page),
``cli`` (the command). The pages are plain HTML and two hand-written scripts (``static/``): no
build step, no framework; the live charts are inline SVG drawn by those scripts from the API's
figures. docs/observability.md describes the pages.
"""
