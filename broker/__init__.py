"""pocketmq.broker: RocketMQ 4.x broker (``mqbroker``).

Composition root :class:`pocketmq.broker.controller.BrokerController`; configuration
:mod:`pocketmq.broker.config`; request processors in :mod:`pocketmq.broker.processor`; pure
tables (topics, groups, offsets, clients, long polling, queue locks) in their own modules.
"""
