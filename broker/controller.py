"""``BrokerController``: the broker's composition root (store, managers, processors, services).

Start order: metadata files → store recovery → remoting servers (main port, and the VIP port
``listenPort-2`` when enabled) → store services → long polling → first registration with every
name server → periodic services (registration every ``registerNameServerPeriod``, consumer
offsets every ``flushConsumerOffsetInterval``, metadata when dirty, client-channel expiry).

Shutdown (SIGTERM) is the reverse and loses nothing acknowledged: held pulls are answered,
servers stop accepting, the broker unregisters from its name servers, the store flushes and
closes, and topics/subscription groups/consumer offsets are persisted.

The controller is the composition root: it builds the store, the managers and the services and
hands each processor exactly the collaborators it uses (``_build_processors``); no processor
holds the controller. Its attributes, for ``__main__``, :mod:`pocketmq.testing` and tests:

=============================  ============================================================
``state``                      :class:`BrokerState`: ``config`` (``update_config`` swaps it),
                               ``store_host``/``broker_addr`` (the advertised address);
                               ``config``, ``store_host`` and ``broker_addr`` read it
``clock``                      :class:`Clock` (wall ``now_ms``, ``monotonic_ms``)
``store``                      :class:`MessageStore`
``topic_config_manager``       :class:`TopicConfigManager`
``subscription_group_manager`` :class:`SubscriptionGroupManager`
``consumer_offset_manager``    :class:`ConsumerOffsetManager`
``consumer_manager``           :class:`ConsumerManager`; ``producer_manager`` likewise
``rebalance_lock_manager``     :class:`RebalanceLockManager`
``pull_hold_service``          :class:`PullRequestHoldService`
``remoting_server``            main :class:`RemotingServer`; ``fast_remoting_server`` or None
``broker2client``              :class:`Broker2Client` (NOTIFY_CONSUMER_IDS_CHANGED, ...)
``broker_stats_manager``       :class:`BrokerStatsManager`: ``on_put`` (send, schedule re-puts),
                               ``on_get`` (pull), ``on_send_back``/``on_send_back_dlq``;
                               ``use_stats`` swaps it everywhere
``*_processor``                send, pull, send_back, consumer_manage, client_manage, query
``admin_processors``           the admin handler groups by class name
(swapping a collaborator)      a processor keeps what it was built with: replace it on the
                               processor too (``use_stats`` does that for the stats manager)
``transactional_message_service``  :class:`TransactionalMessageService` (half messages, commit,
                               rollback, op records); handed to the send processor when it is
                               built (its ``transactions``) and to END_TRANSACTION
``transaction_check_service``  :class:`TransactionalMessageCheckService` (check-back; not
                               started on a slave)
``schedule_message_service``   :class:`ScheduleMessageService`: delayed messages are stored in
                               ``SCHEDULE_TOPIC_XXXX`` (queue level-1, REAL_TOPIC/REAL_QID) and
                               re-put when due (not started on a slave)
``namesrv_api``                :class:`BrokerOuterAPI`
``register_processor``         ``(code, handler, fast=True)`` on both servers
``trigger_register``           re-register with the name servers soon (coalesced)
``register_broker_all``        register now (awaitable)
=============================  ============================================================
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Protocol

from pocketmq.broker.acl import AclConfigError, AclValidator, PlainAclManager
from pocketmq.broker.acl.files import AclFiles
from pocketmq.broker.broker2client import Broker2Client
from pocketmq.broker.client_manager import ConsumerManager, ProducerManager
from pocketmq.broker.config import BrokerConfig, ConfigError
from pocketmq.broker.flow_control import apply_config, queue_wait_of
from pocketmq.broker.longpolling import PullRequestHoldService
from pocketmq.broker.metrics import BrokerMetrics, PutLatency, ha_families
from pocketmq.broker.namesrv_api import BrokerIdentity, BrokerOuterAPI
from pocketmq.broker.offset_manager import ConsumerOffsetManager
from pocketmq.broker.processor.admin import BrokerAdmin, ConsumerAdmin, GroupAdmin, TopicAdmin
from pocketmq.broker.processor.admin_acl import AclAdmin
from pocketmq.broker.processor.admin_base import AdminBase
from pocketmq.broker.processor.admin_broker import PutLatencyWindow, runtime_info
from pocketmq.broker.processor.client_manage import ClientManageProcessor
from pocketmq.broker.processor.consumer_manage import ConsumerManageProcessor
from pocketmq.broker.processor.end_transaction import EndTransactionProcessor
from pocketmq.broker.processor.pull import PullMessageProcessor
from pocketmq.broker.processor.query import QueryMessageProcessor
from pocketmq.broker.processor.reply import ReplyMessageProcessor
from pocketmq.broker.processor.send import SendMessageProcessor
from pocketmq.broker.processor.send_back import ConsumerSendMsgBackProcessor
from pocketmq.broker.rebalance_lock import RebalanceLockManager
from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.broker.slave_sync import SlaveSynchronize
from pocketmq.broker.state import BrokerState, Registrar
from pocketmq.broker.stats import BrokerStatsManager
from pocketmq.broker.subscription import SubscriptionGroupManager
from pocketmq.broker.topic_config import TopicConfigManager
from pocketmq.broker.transaction.check import TransactionalMessageCheckService
from pocketmq.broker.transaction.service import TransactionalMessageService
from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock
from pocketmq.remoting.common.loop_lag import LoopLagMonitor
from pocketmq.remoting.common.metrics_http import PromExporter, start_exporter
from pocketmq.remoting.common.metrics_http import preload as preload_exporter
from pocketmq.remoting.common.service import Service
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import HostAddress
from pocketmq.remoting.protocol.route import PermName, RegisterBrokerResult, TopicConfig
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from pocketmq.remoting.transport.connection import Handler, RemotingConnection
from pocketmq.remoting.transport.hooks import BeforeHook, ReadEnd
from pocketmq.remoting.transport.limits import server_limits
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig
from pocketmq.store import MessageStore

logger = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL = 10.0
CONFIG_PERSIST_INTERVAL = 1.0
#: a slave whose registration named no master registers again after this many seconds
SLAVE_REREGISTER_S = 2.0


class _Periodic(Service):
    """A :class:`Service` running one coroutine function."""

    def __init__(
        self, fn: Callable[[], Awaitable[None]], *, interval: float, initial_delay: float = 0.0, name: str
    ) -> None:
        super().__init__(interval=interval, initial_delay=initial_delay, name=name)
        self._fn = fn

    async def run_once(self) -> None:
        await self._fn()


class _Registers(Protocol):
    def register(self, register: Registrar, /) -> None: ...


class BrokerController:
    def __init__(self, config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK, fsync: bool = True) -> None:
        self.clock = clock
        cfg_dir = config.config_dir
        self.topic_config_manager = TopicConfigManager(
            cfg_dir,
            broker_name=config.broker_name,
            cluster_name=config.broker_cluster_name,
            now_ms=clock.now_ms,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
            cluster_topic_enable=config.cluster_topic_enable,
            broker_topic_enable=config.broker_topic_enable,
            trace_topic_enable=config.trace_topic_enable,
            trace_topic_name=config.msg_trace_topic_name,
            fsync=fsync,
        )
        self.subscription_group_manager = SubscriptionGroupManager(
            cfg_dir,
            now_ms=clock.now_ms,
            auto_create_subscription_group=config.auto_create_subscription_group,
            fsync=fsync,
        )
        self.consumer_offset_manager = ConsumerOffsetManager(cfg_dir, fsync=fsync)
        self.consumer_manager = ConsumerManager(config.channel_expired_timeout)
        self.producer_manager = ProducerManager(config.channel_expired_timeout)
        self.rebalance_lock_manager = RebalanceLockManager()
        self.store = MessageStore(config.store, clock=clock.now_ms)
        #: CommitLog append time of every put, always (as RocketMQ's StoreStatsService): the runtime
        #: info's putLatency99/999 and the metrics' histogram read it. The CommitLog times
        #: put_message (and put_message_pair's two puts) itself, from its store-time clock read;
        #: an instance attribute shadows each other put method (measured: ~0.36 µs of CPU per put).
        self.put_latency = PutLatency()
        self.store.commitlog.latency = self.put_latency
        for name in ("put_messages", "put_batch", "put_run"):
            setattr(self.store, name, self.put_latency.wrap(getattr(self.store, name)))
        #: ``aclEnable``: the rules (None when off) and the server hook enforcing them
        self.acl_manager, hooks = build_acl(config, clock.now_ms, fsync=fsync)
        # tls.server.mode (a missing certificate is a TlsConfigError naming the key)
        server_ssl, permissive = config.server_context(), config.tls_server_mode == "permissive"
        #: flow control (waitTimeMillsIn*Queue), shared by both servers (broker.flow_control)
        self.queue_wait = queue_wait_of(config)
        self.remoting_server = RemotingServer(
            RemotingServerConfig(
                host=config.listen_host,
                port=config.listen_port,
                backlog=config.server_socket_backlog,
                snd_buf=config.server_socket_snd_buf_size,
                rcv_buf=config.server_socket_rcv_buf_size,
                idle_timeout=float(config.server_channel_max_idle_time_seconds),
                ssl=server_ssl,
                tls_permissive=permissive,
                **server_limits(config),
                queue_wait=self.queue_wait,
            ),
            before_hooks=list(hooks),
        )
        fast_port = config.listen_port - 2
        self.fast_remoting_server: RemotingServer | None = None
        if config.fast_listen_enable and config.listen_port > 2:
            self.fast_remoting_server = RemotingServer(
                RemotingServerConfig(
                    host=config.listen_host,
                    port=fast_port,
                    backlog=config.server_socket_backlog,
                    snd_buf=config.server_socket_snd_buf_size,
                    rcv_buf=config.server_socket_rcv_buf_size,
                    idle_timeout=float(config.server_channel_max_idle_time_seconds),
                    ssl=server_ssl,
                    tls_permissive=permissive,
                    **server_limits(config),
                    queue_wait=self.queue_wait,
                ),
                before_hooks=list(hooks),
            )
        outbound = RemotingClientConfig(connect_timeout=3.0, ssl=config.outbound_context(config.use_tls))
        self.namesrv_api = BrokerOuterAPI(RemotingClient(outbound))
        #: the config and advertised address every component reads (update_config swaps it)
        self.state = BrokerState(config)
        self.broker2client = Broker2Client(
            consumers=self.consumer_manager, server=self.remoting_server, state=self.state,
            producers=self.producer_manager,
        )  # fmt: skip
        store = self.store
        self.broker_stats_manager = BrokerStatsManager(
            config.broker_cluster_name,
            clock.now_ms,
            put_total=lambda: store.put_times_total,
            get_total=lambda: store.transferred_msg_count,
        )
        self.schedule_message_service: ScheduleMessageService | None = ScheduleMessageService(
            self.store,
            cfg_dir,
            message_delay_level=config.store.message_delay_level,
            now_ms=clock.now_ms,
            flush_interval_ms=config.store.flush_delay_offset_interval,
            fsync=fsync,
            stats=self._stats_if_enabled,
        )
        self.transactional_message_service = TransactionalMessageService(
            store=self.store, topics=self.topic_config_manager, offsets=self.consumer_offset_manager,
            state=self.state, now_ms=clock.now_ms,
        )  # fmt: skip
        self.transaction_check_service = TransactionalMessageCheckService(
            self.transactional_message_service, send_check=self.broker2client.check_transaction_state,
            config=lambda: self.state.config, now_ms=clock.now_ms,
        )  # fmt: skip
        self._build_processors()
        self.store.arriving_listener = self.pull_hold_service
        self._services: list[Service] = []
        #: a slave's copy of its master's metadata (codes 21, 43, 45, 201; every 10 s)
        self.slave_sync = SlaveSynchronize(
            client=self.namesrv_api.client, topics=self.topic_config_manager,
            groups=self.subscription_group_manager, offsets=self.consumer_offset_manager,
            delay_offsets=schedule.offsets if (schedule := self.schedule_message_service) else None,
        )  # fmt: skip
        self._register_service = _Periodic(
            self._register_periodically,
            interval=config.register_period_ms / 1000,
            initial_delay=config.register_period_ms / 1000,
            name="register-broker",
        )
        self.last_register_result: RegisterBrokerResult | None = None
        #: the Prometheus exporter when ``metricsExporterType=PROM`` (``start_metrics``)
        self.metrics_exporter: PromExporter | None = None
        self.metrics: BrokerMetrics | None = None
        #: how late the event loop runs (``loopLagWarnMillis``; docs/performance.md)
        warn = config.loop_lag_warn_millis
        self.loop_monitor = LoopLagMonitor(warn_ms=warn, name="broker") if warn else None
        self._started = False
        self._stopped = False
        #: topics whose ConsumeQueue files were prepared or existed at start (``_on_topic_change``)
        self._prepared_topics: set[str] | None = None
        self.topic_config_manager.on_change = self._on_topic_change
        self._register_processors()

    # ------------------------------------------------------------------------- processors
    def _build_processors(self) -> None:
        """Build every processor with exactly the collaborators it uses."""
        store, state, stats, clock = self.store, self.state, self.broker_stats_manager, self.clock
        topics, groups = self.topic_config_manager, self.subscription_group_manager
        offsets, consumers = self.consumer_offset_manager, self.consumer_manager
        schedule = self.schedule_message_service
        cfg = state.config
        self.pull_hold_service = PullRequestHoldService(
            None,  # set by the pull processor: its execute_when_wakeup
            store.get_max_offset_in_queue,
            max_per_queue=cfg.max_held_pulls_per_queue,
            check_interval=5.0 if cfg.long_polling_enable else cfg.short_polling_time_mills / 1000,
        )
        self.send_processor = SendMessageProcessor(
            store=store, topics=topics, groups=groups, state=state, now_ms=clock.now_ms,
            held_queues=self.pull_hold_service.held_queues, stats=stats, schedule=schedule,
            transactions=self.transactional_message_service,
        )  # fmt: skip
        self.pull_processor = PullMessageProcessor(
            store=store, topics=topics, groups=groups, offsets=offsets, consumers=consumers,
            hold=self.pull_hold_service, state=state, stats=stats,
        )  # fmt: skip
        self.send_back_processor = ConsumerSendMsgBackProcessor(
            store=store, topics=topics, groups=groups, state=state, stats=stats, schedule=schedule
        )
        self.consumer_manage_processor = ConsumerManageProcessor(
            store=store, offsets=offsets, consumers=consumers, state=state
        )
        self.client_manage_processor = ClientManageProcessor(
            topics=topics, groups=groups, consumers=consumers, producers=self.producer_manager,
            locks=self.rebalance_lock_manager, notifier=self.broker2client, state=state, clock=clock,
        )  # fmt: skip
        self.query_processor = QueryMessageProcessor(store=store, state=state)
        self.end_transaction_processor = EndTransactionProcessor(
            transactions=self.transactional_message_service, state=state
        )
        self.reply_processor = ReplyMessageProcessor(
            producers=self.producer_manager, consumers=consumers, server=self.remoting_server, state=state,
            now_ms=clock.now_ms, store_reply=self.send_processor.process,
        )  # fmt: skip
        register_broker = self.register_broker_all
        topic_admin = TopicAdmin(
            store=store, topics=topics, offsets=offsets, consumers=consumers, state=state, stats=stats,
            register_broker=register_broker,
        )  # fmt: skip
        group_admin = GroupAdmin(
            topics=topics, groups=groups, offsets=offsets, consumers=consumers,
            producers=self.producer_manager, state=state, stats=stats, schedule=schedule,
        )  # fmt: skip
        consumer_admin = ConsumerAdmin(
            store=store, topics=topics, groups=groups, offsets=offsets, consumers=consumers, state=state,
            stats=stats, server=self.remoting_server, clock=clock,
        )  # fmt: skip
        broker_admin = BrokerAdmin(
            store=store, topics=topics, state=state, stats=stats, schedule=schedule, clock=clock,
            update_config=self.update_config, register_broker=register_broker,
            transactions=self.transactional_message_service,
            put_latency=PutLatencyWindow(self.put_latency, clock.monotonic),
        )  # fmt: skip
        acl_admin = AclAdmin(state=state, stats=stats, acl=self.acl_manager)
        admins: tuple[AdminBase, ...] = (topic_admin, group_admin, consumer_admin, broker_admin, acl_admin)
        #: the admin handler groups by class name (tests and tools tune them, e.g.
        #: ``ConsumerAdmin.call_client_timeout``)
        self.admin_processors: dict[str, AdminBase] = {type(a).__name__: a for a in admins}

    def use_stats(self, stats: BrokerStatsManager) -> None:
        """Feed and read ``stats`` from now on (e.g. one on a test's fake clock)."""
        self.broker_stats_manager = stats
        self.send_processor.stats = self.pull_processor.stats = self.send_back_processor.stats = stats
        for admin in self.admin_processors.values():
            admin.stats = stats

    @property
    def config(self) -> BrokerConfig:
        return self.state.config

    @property
    def store_host(self) -> HostAddress:
        return self.state.store_host

    @property
    def broker_addr(self) -> str:
        return self.state.broker_addr

    def _identity(self) -> BrokerIdentity:
        """How this broker names itself to the name servers (its current config and address)."""
        cfg = self.config
        return BrokerIdentity(cfg.broker_cluster_name, self.broker_addr, cfg.broker_name, cfg.broker_id)

    def register_processor(self, code: int, handler: Handler, *, fast: bool = True) -> None:
        """Serve ``code`` on the main port and (unless ``fast=False``) on the VIP port."""
        self.remoting_server.register(code, handler)
        if fast and self.fast_remoting_server is not None:
            self.fast_remoting_server.register(code, handler)

    def _register_processors(self) -> None:
        reg = self.register_processor
        processors: tuple[_Registers, ...] = (
            self.send_processor,
            self.send_back_processor,
            self.pull_processor,
            self.consumer_manage_processor,
            self.client_manage_processor,
            *self.admin_processors.values(),
            self.query_processor,
            self.end_transaction_processor,
            self.reply_processor,
        )
        for processor in processors:
            processor.register(reg)
        # a send's reput slice runs at the end of the read that stored it (both servers share it)
        read_end = self.store.read_end = ReadEnd()
        for server in self._servers():
            server.dispatcher.on_close.append(self._on_channel_close)
            server.read_end = read_end

    def _servers(self) -> list[RemotingServer]:
        return [s for s in (self.remoting_server, self.fast_remoting_server) if s is not None]

    # -------------------------------------------------------------------------- lifecycle
    def load(self) -> None:
        """Metadata files and store recovery (blocking; called by :meth:`start`)."""
        self.topic_config_manager.load()
        self.subscription_group_manager.load()
        self.consumer_offset_manager.load()
        self.store.load()
        # stored messages are never orphaned: a topic missing from topics.json is given a config
        if self.topic_config_manager.restore_missing(self.store.queue_counts()):
            self.topic_config_manager.persist()
        if self.schedule_message_service is not None:
            # after recovery: its offsets are checked against the recovered schedule queues
            self.schedule_message_service.load()
        # after recovery: progress fitted to the recovered queues, resolved set from the op queue
        self.transactional_message_service.load()

    async def start(self) -> None:
        """Load, listen, start services and register with the name servers.

        Raises:
            OSError: a port cannot be bound or store files cannot be opened.
            StoreLockedError: another process has this store open.
        """
        if self._started:
            raise RuntimeError("broker already started")
        self._started = True
        cfg = self.config
        try:
            self.load()
            if cfg.metrics_exporter_type == "PROM":
                preload_exporter()  # (its imports, not on the loop once clients can connect)
            await self.remoting_server.start()
        except BaseException:
            # Leave nothing half-open: a port clash must not leave the store locked with an
            # abort file (the next start would run the slower abnormal recovery).
            await self.remoting_server.stop()
            self.store.close()
            self._stopped = True
            raise
        if cfg.listen_port == 0:
            # Ephemeral port (tests): advertise what the kernel picked.
            self.state.bound_to(self.remoting_server.port)
        if self.fast_remoting_server is not None:
            try:
                await self.fast_remoting_server.start()
            except OSError as exc:
                logger.warning(
                    "VIP port %d unavailable (%s); serving on %d only",
                    cfg.listen_port - 2,
                    exc,
                    cfg.listen_port,
                )
                self.fast_remoting_server = None
        await self.store.start()
        self._prepared_topics = set(self.topic_config_manager.topic_config_table)
        await self._start_ha()
        self.pull_hold_service.start()
        schedule = self.schedule_message_service
        if schedule is not None and not cfg.is_slave:
            schedule.start()
        if not cfg.is_slave:
            self.transaction_check_service.start()
        if cfg.is_slave:
            self._services.append(self.slave_sync.service())
        self._services += [
            self._register_service,
            _Periodic(self._flush_offsets, interval=cfg.flush_consumer_offset_interval / 1000, name="offset-flush"),
            _Periodic(self._persist_config, interval=CONFIG_PERSIST_INTERVAL, name="config-persist"),
            _Periodic(self._scan_clients, interval=CLIENT_SCAN_INTERVAL, initial_delay=CLIENT_SCAN_INTERVAL, name="client-scan"),
        ]  # fmt: skip
        if self.acl_manager is not None:
            self._services.append(
                _Periodic(self._reload_acl, interval=cfg.acl_file_watch_interval_ms / 1000, name="acl-watch")
            )
        for service in self._services:
            service.start()
        if self.loop_monitor is not None:
            self.loop_monitor.start()
        if cfg.metrics_exporter_type == "PROM":
            await self.start_metrics()
        logger.info(
            "The broker[%s, %s] boot success. cluster=%s brokerId=%d role=%s flush=%s store=%s name server=%s",
            cfg.broker_name, self.broker_addr, cfg.broker_cluster_name, cfg.broker_id,
            cfg.store.broker_role.value, cfg.store.flush_disk_type.value, cfg.store.store_path_root_dir,
            cfg.namesrv_addr or "(none)",
        )  # fmt: skip
        await self.register_broker_all()

    async def shutdown(self) -> None:
        """Clean shutdown: answer held pulls, stop serving, unregister, flush and persist."""
        if self._stopped or not self._started:
            self._stopped = True
            return
        self._stopped = True
        cfg = self.config
        if self.loop_monitor is not None:
            self.loop_monitor.stop()
        for service in reversed(self._services):
            await service.stop(grace=2.0)
        if self.metrics_exporter is not None:
            await self.metrics_exporter.stop()
        if self.schedule_message_service is not None:
            # stops between two re-puts and writes delayOffset.json: nothing is put twice
            await self.schedule_message_service.stop(grace=2.0)
        # between two slices of a run; its progress is in the consumer offsets persisted below
        await self.transaction_check_service.stop(grace=2.0)
        await self.pull_hold_service.stop()
        for server in self._servers():
            await server.stop()
        if cfg.namesrv_addr_list:
            await self.namesrv_api.unregister_broker_all(cfg.namesrv_addr_list, self._identity())
        try:
            await self.store.shutdown()
        finally:
            # Metadata is written even if the store's last flush failed (e.g. a full disk).
            loop = asyncio.get_running_loop()
            for mgr in (
                self.consumer_offset_manager,
                self.topic_config_manager,
                self.subscription_group_manager,
            ):
                try:
                    await loop.run_in_executor(None, mgr.persist)
                except OSError:
                    logger.exception("could not persist %s at shutdown", mgr.path)
            await self.namesrv_api.close()
        logger.info("The broker[%s, %s] shut down", cfg.broker_name, self.broker_addr)

    async def start_metrics(self) -> None:
        """Serve ``/metrics`` (``broker.metrics``); its put-latency histogram is ``self.put_latency``."""
        cfg = self.config
        store = self.store
        metrics = BrokerMetrics(
            state=self.state, store=store, stats=lambda: self.broker_stats_manager,
            topics=self.topic_config_manager, groups=self.subscription_group_manager,
            offsets=self.consumer_offset_manager, consumers=self.consumer_manager,
            producers=self.producer_manager, held_pulls=lambda: len(self.pull_hold_service.table),
            connections=lambda: sum(len(s.connections) for s in self._servers()),
            runtime_info=lambda: runtime_info(store, self.broker_stats_manager, self.config,
                                              self.schedule_message_service),
            flush_behind=lambda: int(store.runtime_info().get("remainHowManyDataToFlush", "0")),
            now_ms=self.clock.now_ms, exporter_compat=cfg.metrics_rocketmq_exporter_compat,
            latency=self.put_latency,
        )  # fmt: skip
        metrics.sources.append(
            lambda: ha_families(store.ha_runtime_info(), cfg.broker_cluster_name, cfg.broker_name)
        )
        monitor = self.loop_monitor
        if monitor is not None:
            node = [cfg.broker_cluster_name, "broker", cfg.broker_name]
            metrics.sources.append(lambda: monitor.families(["cluster", "node_type", "node_id"], node))
        exporter = await start_exporter(
            metrics,
            host=cfg.metrics_prom_exporter_host,
            port=cfg.metrics_prom_exporter_port,
            label=cfg.metrics_label,
        )
        self.metrics = metrics
        self.metrics_exporter = exporter

    # ----------------------------------------------------------------------- registration
    def trigger_register(self) -> None:
        """Register with the name servers as soon as possible (coalesces bursts of changes)."""
        if self._register_service.is_running:
            self._register_service.wakeup()

    def _on_topic_change(self) -> None:
        self.trigger_register()
        # new topics: their first ConsumeQueue files are made now, off the loop (store.prepare_topic)
        table = self.topic_config_manager.topic_config_table
        if self._prepared_topics is not None:
            for name in table.keys() - self._prepared_topics:
                self.store.prepare_topic(name, table[name].write_queue_nums)
            self._prepared_topics = set(table)  # (a deleted topic is prepared again if re-created)

    async def _register_periodically(self) -> None:
        await self.register_broker_all()

    async def register_broker_all(self) -> None:
        """Send REGISTER_BROKER with the current topic table to every name server."""
        cfg = self.config
        addrs = cfg.namesrv_addr_list
        if not addrs:
            return
        wrapper = self.topic_config_manager.build_wrapper()
        perm = cfg.broker_permission
        if not (PermName.is_writeable(perm) and PermName.is_readable(perm)):
            wrapper.topic_config_table = {
                name: TopicConfig(name, tc.read_queue_nums, tc.write_queue_nums, perm, tc.topic_filter_type,
                                  tc.topic_sys_flag, tc.order)
                for name, tc in wrapper.topic_config_table.items()
            }  # fmt: skip
        result = await self.namesrv_api.register_broker_all(
            addrs,
            self._identity(),
            ha_server_addr=self.ha_server_addr,
            wrapper=wrapper,
            compressed=cfg.compressed_register,
            timeout=cfg.register_broker_timeout_mills / 1000,
        )
        if result is not None and result.kv_table is not None:
            self.topic_config_manager.update_order_topic_config(set(result.kv_table.table))
        if result is not None and cfg.is_slave:
            # RocketMQ: a slave follows the live master the name server names (unless
            # haMasterAddress is set) and copies its metadata from masterAddr
            if result.ha_server_addr:
                self.store.update_ha_master_address(result.ha_server_addr)
            elif self.store.ha_slave is not None and self.store.ha_slave.master_address is None:
                # no master known yet (started together): ask again soon rather than at the next
                # period (30 s), so replication starts once the master is up. A slave that lost
                # its master keeps the old address (reconnecting every 5 s) and the usual period.
                asyncio.get_running_loop().call_later(SLAVE_REREGISTER_S, self.trigger_register)
            self.slave_sync.master_addr = result.master_addr or None
        self.last_register_result = result

    # --------------------------------------------------------------------------------- HA
    async def _start_ha(self) -> None:
        """Replication: a master listens on ``haListenPort`` (a free port when the broker's own
        port is ephemeral and ``haListenPort`` was not set), a slave follows its master."""
        cfg = self.config
        port = cfg.store.ha_listen_port
        if cfg.listen_port == 0 and "ha_listen_port" not in cfg.store.model_fields_set:
            port = 0
        try:
            await self.store.start_ha(host=cfg.listen_host, port=port)
        except BaseException:
            await self.remoting_server.stop()
            if self.fast_remoting_server is not None:
                await self.fast_remoting_server.stop()
            await self.store.shutdown()
            self._stopped = True
            raise

    @property
    def ha_server_addr(self) -> str:
        """``brokerIP2:haListenPort`` as bound (sent in REGISTER_BROKER)."""
        cfg = self.config
        master = self.store.ha_master
        port = master.port if master is not None else cfg.store.ha_listen_port
        return f"{cfg.broker_ip2 or cfg.broker_ip1}:{port}"

    # --------------------------------------------------------------------------- services
    async def _reload_acl(self) -> None:
        if self.acl_manager is not None:
            self.acl_manager.maybe_reload()

    async def _flush_offsets(self) -> None:
        if self.consumer_offset_manager.dirty:
            await self.consumer_offset_manager.persist_async()

    async def _persist_config(self) -> None:
        for mgr in (self.topic_config_manager, self.subscription_group_manager):
            if mgr.dirty:
                await mgr.persist_async()

    async def _scan_clients(self) -> None:
        now = self.clock.monotonic_ms()
        for group, info in self.consumer_manager.scan_not_active_channel(now):
            logger.warning("consumer %s of group %s expired (no heartbeat); closing", info.client_id, group)
            _close(info.conn)
            self.broker2client.notify_consumer_ids_changed(group)
        for group, info in self.producer_manager.scan_not_active_channel(now):
            logger.warning("producer %s of group %s expired (no heartbeat); closing", info.client_id, group)
            _close(info.conn)

    def _on_channel_close(self, conn: RemotingConnection) -> None:
        self.pull_hold_service.drop_connection(conn)
        self.producer_manager.do_channel_close_event(conn)
        for group in self.consumer_manager.do_channel_close_event(conn):
            self.broker2client.notify_consumer_ids_changed(group)

    def _stats_if_enabled(self) -> BrokerStatsManager | None:
        """The stats manager for schedule re-puts (``enableScheduleMessageStats``)."""
        return self.broker_stats_manager if self.config.store.enable_schedule_message_stats else None

    # ------------------------------------------------------------------------------ config
    def update_config(self, config: BrokerConfig) -> None:
        """Adopt an updated config (UPDATE_BROKER_CONFIG); re-register if the permission changed."""
        old, self.state.config = self.state.config, config
        apply_config(self.queue_wait, config)
        if old.broker_permission != config.broker_permission or old.namesrv_addr != config.namesrv_addr:
            self.trigger_register()

    @property
    def store_path(self) -> str:
        return os.path.abspath(self.config.store.store_path_root_dir)


def build_acl(
    config: BrokerConfig, now_ms: Callable[[], int], *, fsync: bool
) -> tuple[PlainAclManager | None, tuple[BeforeHook, ...]]:
    """The ACL manager (rules loaded now) and the servers' before-hooks for ``aclEnable`` (none
    when off: a broker without ACL runs no check at all).

    Raises:
        ConfigError: ACL on without ``rocketmqHome``, without any ACL file, or with a bad one.
    """
    if not config.acl_enable:
        return None, ()
    if not config.rocketmq_home:
        raise ConfigError(
            "aclEnable=true needs rocketmqHome (or ROCKETMQ_HOME): the ACL files are "
            "<rocketmqHome>/conf/plain_acl.yml and <rocketmqHome>/conf/acl/*.yml",
            key="rocketmqHome",
        )
    manager = PlainAclManager(AclFiles(config.rocketmq_home, fsync=fsync), now_ms=now_ms)
    try:
        manager.load()
    except AclConfigError as exc:
        raise ConfigError(f"aclEnable=true: {exc}", key="aclEnable") from None
    return manager, (AclValidator(manager).before_request,)


def _close(conn: RemotingConnection) -> None:
    try:
        conn.close()
    except Exception:  # pragma: no cover - closing a dead transport
        logger.debug("close failed", exc_info=True)


__all__ = ["BrokerController", "RemotingCommand"]
