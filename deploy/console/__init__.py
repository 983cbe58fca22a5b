"""The web console (``pocketmq console -n NAMESRV``, or ``pocketmq up --console``).

The pages rocketmq-dashboard users know (cluster, topics, consumer groups, producers, messages,
message traces) served by aiohttp: ``server.ConsoleServer`` (the application: static pages +
``api`` routes over one :class:`~pocketmq.client.admin.MQAdmin`), ``cli`` (the command). The
pages are plain HTML and one hand-written script (``static/``): no build step, no framework; the
live charts are inline SVG drawn by that script from the API's figures. docs/observability.md
describes the pages.
"""
