"""pocketmq.spark: a PySpark (>= 4.2) Python Data Source for RocketMQ, ``format("rocketmq")``.

Modules (only :mod:`~pocketmq.spark.source` and :mod:`~pocketmq.spark.rows` need pyspark /
pyarrow; importing this package imports neither):

========================  ==================================================================
``options``               option names, validation, :class:`SourceOptions`
``offsets``               canonical offset JSON ``{"topic": {"broker": {"queueId": next}}}``
``planning``              reconcile with the cluster, data-loss decisions, rate limit, ranges
``metadata``              routes and per-queue min/max offsets (driver; blocking, parallel)
``reader``                the executor pull loop for one ``[from, until)`` range
``rows``                  output schema, pull body -> Arrow record batches
``source``                the DataSource / stream reader / batch reader classes
``pyspark_rocketmq``      installed top-level for PySpark's auto-registration
========================  ==================================================================

The package speaks RocketMQ through public modules only: wire types and rules from
:mod:`pocketmq.remoting.protocol` (``route``, ``heartbeat``'s ``MessageQueue`` and
``SubscriptionData``, ``topics``, ``codes``, ``message``'s record layout), and the blocking
client :mod:`pocketmq.remoting.transport.blocking` (executors and the planner run no event loop).

See ``spark/README.md`` for usage.
"""
