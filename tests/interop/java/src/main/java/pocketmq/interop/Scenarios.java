package pocketmq.interop;

import static pocketmq.interop.Clients.await;
import static pocketmq.interop.Clients.check;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/** The scenarios, by name. Each returns a short description of what it saw, or throws. */
final class Scenarios {
    private Scenarios() {}

    static final Map<String, Driver.Scenario> ALL = new LinkedHashMap<>();

    static {
        ALL.put("sync", Scenarios::sync);
        ALL.put("async", Scenarios::async);
        ALL.put("oneway", Scenarios::oneway);
        ALL.put("batch", Scenarios::batch);
        ALL.put("delay", Scenarios::delay);
        ALL.put("tag_filter", Scenarios::tagFilter);
        ALL.put("orderly", ctx -> orderly(ctx, false));
        ALL.put("orderly_suspend", ctx -> orderly(ctx, true));
        ALL.put("broadcasting", Scenarios::broadcasting);
        ALL.put("clustering", Scenarios::clustering);
        ALL.put("retry", Scenarios::retry);
        ALL.put("lite_pull", Scenarios::litePull);
        ALL.put("pull_consumer", Scenarios::pullConsumer);
        ALL.put("query_by_key", Scenarios::queryByKey);
        ALL.put("view_by_offset_id", ctx -> view(ctx, true));
        ALL.put("view_by_uniq_id", ctx -> view(ctx, false));
        ALL.put("trace", Scenarios::trace);
        ALL.put("namespace", Scenarios::namespace);
        ALL.put("dlq", Scenarios::dlq);
        ALL.put("request_reply", PendingScenarios::requestReply);
        ALL.put("sql92", PendingScenarios::sql92);
        ALL.put("transaction", PendingScenarios::transaction);
        ALL.put("acl", PendingScenarios::acl);
        ALL.put("acl_denied", PendingScenarios::aclDenied);
        ALL.put("sdk_produced", Scenarios::sdkProduced);
        ALL.put("slave_produce", PendingScenarios::slaveProduce);
        ALL.put("slave_consume", PendingScenarios::slaveConsume);
    }

    static Message msg(Driver.Ctx ctx, String topic, String tags, String keys, String body) {
        Message m = new Message(topic, tags, keys, ctx.body(body));
        m.putUserProperty("scenario", ctx.scenario);
        return m;
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    /** Starts a collecting push consumer of {@code topic} from the first offset. */
    static DefaultMQPushConsumer collect(
            Driver.Ctx ctx, String topic, String expr, Clients.Collector c) throws Exception {
        DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, ctx.name("CG"), "consumer");
        consumer.subscribe(topic, expr);
        consumer.registerMessageListener(c);
        consumer.start();
        return consumer;
    }

    /** Sends {@code n} messages (tags A, keys K<i>, bodies b<i>) and checks each is SEND_OK. */
    static void sendPlain(Driver.Ctx ctx, DefaultMQProducer p, String topic, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            SendResult r = p.send(msg(ctx, topic, "A", "K" + i, "b" + i));
            check(r.getSendStatus() == SendStatus.SEND_OK, "status " + r);
        }
    }

    /** Consumes {@code n} distinct messages of {@code topic} with a new push consumer, then stops it. */
    static Clients.Collector consumeAll(Driver.Ctx ctx, String topic, String expr, int n, long seconds)
            throws Exception {
        Clients.Collector c = new Clients.Collector();
        DefaultMQPushConsumer consumer = collect(ctx, topic, expr, c);
        try {
            c.awaitDistinct(n, seconds);
        } finally {
            consumer.shutdown();
        }
        return c;
    }

    // ---- sending

    static String sync(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Map<String, Integer> sent = new LinkedHashMap<>();
            for (int i = 0; i < 10; i++) {  // the first send auto-creates the topic (TBW102)
                SendResult r = p.send(msg(ctx, topic, "TagA", "K" + i, "body-" + i));
                check(r.getSendStatus() == SendStatus.SEND_OK, "status " + r);
                check(r.getOffsetMsgId() != null && r.getOffsetMsgId().length() == 32, "offset msgId " + r);
                sent.put(r.getMsgId(), i);
            }
            Clients.Collector c = consumeAll(ctx, topic, "*", 10, 30);
            for (MessageExt m : c.distinct.values()) {
                Integer i = sent.get(m.getMsgId());
                check(i != null, "unknown msgId " + m.getMsgId());
                check(body(m).equals("body-" + i), "body " + body(m));
                check(("K" + i).equals(m.getKeys()) && "TagA".equals(m.getTags()), "keys/tags " + m);
                check(ctx.scenario.equals(m.getUserProperty("scenario")), "user property " + m.getProperties());
                check(topic.equals(m.getTopic()), "topic " + m.getTopic());
            }
            return "10 sent and consumed, bodies/keys/tags/properties intact";
        } finally {
            p.shutdown();
        }
    }

    static String async(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            CountDownLatch done = new CountDownLatch(10);
            List<Object> results = new CopyOnWriteArrayList<>();
            for (int i = 0; i < 10; i++) {
                p.send(msg(ctx, topic, "A", "K" + i, "b" + i), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        results.add(r);
                        done.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        results.add(e);
                        done.countDown();
                    }
                });
            }
            check(done.await(30, TimeUnit.SECONDS), "async callbacks");
            for (Object r : results) {
                check(r instanceof SendResult && ((SendResult) r).getSendStatus() == SendStatus.SEND_OK, "result " + r);
            }
            Clients.Collector c = consumeAll(ctx, topic, "*", 10, 30);
            return "10 async sends acknowledged and consumed";
        } finally {
            p.shutdown();
        }
    }

    static String oneway(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            for (int i = 0; i < 50; i++) {
                p.sendOneway(msg(ctx, topic, "A", "K" + i, "b" + i));
            }
        } finally {
            p.shutdown();  // right after the oneway sends: the broker still serves them all
        }
        Clients.Collector c = consumeAll(ctx, topic, "*", 50, 30);
        return "50 oneway sends then shutdown: all 50 consumed";
    }

    static String batch(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                batch.add(msg(ctx, topic, "A", "K" + i, "b" + i));
            }
            SendResult r = p.send(batch);
            check(r.getSendStatus() == SendStatus.SEND_OK, "status " + r);
            check(r.getMsgId().split(",").length == 20, "20 msgIds in " + r.getMsgId());
            Clients.Collector c = consumeAll(ctx, topic, "*", 20, 30);
            Set<Integer> queues = new HashSet<>();
            List<Long> offsets = new ArrayList<>();
            for (MessageExt m : c.distinct.values()) {
                queues.add(m.getQueueId());
                offsets.add(m.getQueueOffset());
            }
            Collections.sort(offsets);
            check(queues.size() == 1, "one batch, one queue: " + queues);
            check(offsets.get(19) - offsets.get(0) == 19, "contiguous offsets " + offsets);
            return "batch of 20 stored in one queue at contiguous offsets";
        } finally {
            p.shutdown();
        }
    }

    static String delay(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            Clients.Collector c = new Clients.Collector();
            DefaultMQPushConsumer consumer = collect(ctx, topic, "*", c);
            try {
                Map<String, Long> sentAt = new ConcurrentHashMap<>();
                for (int i = 0; i < 3; i++) {
                    Message m = msg(ctx, topic, "A", "K" + i, "b" + i);
                    m.setDelayTimeLevel(2);  // 5 s
                    sentAt.put(p.send(m).getMsgId(), System.currentTimeMillis());
                }
                c.awaitDistinct(3, 40);
                for (MessageExt m : c.distinct.values()) {
                    long waited = c.receivedAt.get(m.getMsgId()) - sentAt.get(m.getMsgId());
                    check(waited >= 4000, "delivered after " + waited + " ms, level 2 is 5 s");
                    check(m.getDelayTimeLevel() == 2, "getDelayTimeLevel() " + m.getDelayTimeLevel());
                    check(topic.equals(m.getTopic()), "topic " + m.getTopic());
                    check(topic.equals(m.getProperty("REAL_TOPIC")), "REAL_TOPIC " + m.getProperties());
                    check(m.getProperty("REAL_QID") != null, "REAL_QID " + m.getProperties());
                }
            } finally {
                consumer.shutdown();
            }
            return "3 level-2 messages delivered after >= 4 s with DELAY=2, REAL_TOPIC, REAL_QID";
        } finally {
            p.shutdown();
        }
    }

    static String tagFilter(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            for (int i = 0; i < 15; i++) {
                String tag = new String[] {"TagB", "TagA", "TagC"}[i % 3];
                p.send(msg(ctx, topic, tag, "K" + i, tag + i));
            }
            Clients.Collector c = new Clients.Collector();
            DefaultMQPushConsumer consumer = collect(ctx, topic, "TagA || TagC", c);
            try {
                c.awaitDistinct(10, 30);
                Thread.sleep(500);  // a TagB delivery would have come with its queue's first pull
            } finally {
                consumer.shutdown();
            }
            for (MessageExt m : c.all()) {
                check(!"TagB".equals(m.getTags()), "TagB delivered: " + body(m));
            }
            check(c.distinct.size() == 10, "10 distinct, got " + c.distinct.size());
            return "TagA || TagC: 10 of 15 delivered, no TagB";
        } finally {
            p.shutdown();
        }
    }

    static String orderly(Driver.Ctx ctx, boolean suspend) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        int orders = 4;
        int perOrder = 10;
        try {
            Clients.ensureTopic(p, topic, 4);
            for (int seq = 0; seq < perOrder; seq++) {
                for (int order = 0; order < orders; order++) {
                    Message m = msg(ctx, topic, "A", "O" + order, order + ":" + seq);
                    SendResult r = p.send(m, (mqs, mm, arg) -> mqs.get((Integer) arg % mqs.size()), order);
                    check(r.getSendStatus() == SendStatus.SEND_OK, "status " + r);
                }
            }
            Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
            AtomicInteger suspended = new AtomicInteger();
            AtomicInteger redelivered = new AtomicInteger();
            DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, ctx.name("CG"), "consumer");
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    String[] parts = body(m).split(":");
                    int order = Integer.parseInt(parts[0]);
                    int seq = Integer.parseInt(parts[1]);
                    if (suspend && order == 1 && seq == 5 && suspended.getAndIncrement() == 0) {
                        context.setSuspendCurrentQueueTimeMillis(300);
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                    if (suspend && order == 1 && seq == 5) {
                        redelivered.set(m.getReconsumeTimes());
                    }
                    seen.computeIfAbsent(order, k -> new CopyOnWriteArrayList<>()).add(seq);
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
            consumer.start();
            try {
                await("every order consumed", 40, () -> {
                    int n = 0;
                    for (List<Integer> l : seen.values()) {
                        n += l.size();
                    }
                    return n >= orders * perOrder;
                });
            } finally {
                consumer.shutdown();
            }
            for (int order = 0; order < orders; order++) {
                List<Integer> l = seen.get(order);
                List<Integer> want = new ArrayList<>();
                for (int s = 0; s < perOrder; s++) {
                    want.add(s);
                }
                check(want.equals(l), "order " + order + " consumed as " + l);
            }
            if (suspend) {
                check(redelivered.get() >= 1, "suspended message redelivered with reconsumeTimes " + redelivered);
                return "suspend then redelivery kept every order's sequence";
            }
            return orders + " orders x " + perOrder + " consumed in sequence";
        } finally {
            p.shutdown();
        }
    }

    // ---- consuming

    static String broadcasting(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        try {
            Clients.ensureTopic(p, topic, 4);
            List<Clients.Collector> collectors = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Clients.Collector c = new Clients.Collector();
                DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, ctx.name("CG"), "c" + i);
                consumer.setMessageModel(MessageModel.BROADCASTING);
                consumer.subscribe(topic, "*");
                consumer.registerMessageListener(c);
                consumer.start();
                consumers.add(consumer);
                collectors.add(c);
            }
            sendPlain(ctx, p, topic, 10);
            for (Clients.Collector c : collectors) {
                c.awaitDistinct(10, 30);
            }
            return "both broadcasting consumers got all 10";
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                c.shutdown();
            }
            p.shutdown();
        }
    }

    /** How many queues of {@code topic} (not of the group's %RETRY% topic) the consumer holds. */
    private static long assigned(DefaultMQPushConsumer c, String topic) {
        return c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet().stream()
                .filter(mq -> mq.getTopic().equals(topic)).count();
    }

    static String clustering(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        try {
            Clients.ensureTopic(p, topic, 4);
            List<Clients.Collector> collectors = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Clients.Collector c = new Clients.Collector();
                DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, ctx.name("CG"), "c" + i);
                consumer.subscribe(topic, "*");
                consumer.registerMessageListener(c);
                consumer.start();
                consumers.add(consumer);
                collectors.add(c);
            }
            // NOTIFY_CONSUMER_IDS_CHANGED makes the first one give up half of the queues
            await("two queues each", 30, () -> assigned(consumers.get(0), topic) == 2 && assigned(consumers.get(1), topic) == 2);
            sendPlain(ctx, p, topic, 20);
            await("20 distinct over both", 30, () -> {
                Set<String> all = new HashSet<>(collectors.get(0).ids());
                all.addAll(collectors.get(1).ids());
                return all.size() == 20;
            });
            Set<String> both = new HashSet<>(collectors.get(0).ids());
            both.retainAll(collectors.get(1).ids());
            check(both.isEmpty(), "delivered to both: " + both);
            check(!collectors.get(0).ids().isEmpty() && !collectors.get(1).ids().isEmpty(), "both got some");
            return "20 split " + collectors.get(0).ids().size() + "/" + collectors.get(1).ids().size();
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                c.shutdown();
            }
            p.shutdown();
        }
    }

    static String retry(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            sendPlain(ctx, p, topic, 2);
            Map<String, List<MessageExt>> deliveries = new ConcurrentHashMap<>();
            Map<String, List<Long>> times = new ConcurrentHashMap<>();
            DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, ctx.name("CG"), "consumer");
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                boolean later = false;
                for (MessageExt m : msgs) {
                    deliveries.computeIfAbsent(m.getKeys(), k -> new CopyOnWriteArrayList<>()).add(m);
                    times.computeIfAbsent(m.getKeys(), k -> new CopyOnWriteArrayList<>()).add(System.currentTimeMillis());
                    later |= deliveries.get(m.getKeys()).size() == 1;
                }
                return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            try {
                await("2 redeliveries", 45, () -> deliveries.size() == 2
                        && deliveries.values().stream().allMatch(l -> l.size() >= 2));
            } finally {
                consumer.shutdown();
            }
            for (Map.Entry<String, List<MessageExt>> e : deliveries.entrySet()) {
                MessageExt again = e.getValue().get(1);
                long waited = times.get(e.getKey()).get(1) - times.get(e.getKey()).get(0);
                check(again.getReconsumeTimes() == 1, "reconsumeTimes " + again.getReconsumeTimes());
                check(topic.equals(again.getTopic()), "topic restored: " + again.getTopic());
                check(waited >= 9000, "first retry after " + waited + " ms; level 3 is 10 s");
            }
            return "RECONSUME_LATER: redelivered once after ~10 s, reconsumeTimes 1, topic restored";
        } finally {
            p.shutdown();
        }
    }

    static String litePull(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            sendPlain(ctx, p, topic, 10);
            DefaultLitePullConsumer c = new DefaultLitePullConsumer(ctx.name("CG"), Clients.hook(ctx));
            c.setNamesrvAddr(ctx.namesrv);
            c.setInstanceName(ctx.name("I_lite"));
            c.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.start();
            Set<String> got = new HashSet<>();
            try {
                long deadline = System.currentTimeMillis() + 30_000;
                while (got.size() < 10 && System.currentTimeMillis() < deadline) {
                    for (MessageExt m : c.poll(1000)) {
                        got.add(m.getMsgId());
                    }
                }
                c.commitSync();
            } finally {
                c.shutdown();
            }
            check(got.size() == 10, "lite pull got " + got.size());
            return "DefaultLitePullConsumer polled 10";
        } finally {
            p.shutdown();
        }
    }

    static String pullConsumer(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            sendPlain(ctx, p, topic, 10);
            DefaultMQPullConsumer c = new DefaultMQPullConsumer(ctx.name("CG"), Clients.hook(ctx));
            c.setNamesrvAddr(ctx.namesrv);
            c.setInstanceName(ctx.name("I_pull"));
            c.start();
            int got = 0;
            try {
                for (MessageQueue mq : c.fetchSubscribeMessageQueues(topic)) {
                    long offset = 0;
                    while (true) {
                        PullResult r = c.pull(mq, "*", offset, 32);
                        if (r.getPullStatus() != PullStatus.FOUND) {
                            check(r.getPullStatus() == PullStatus.NO_NEW_MSG, "pull status " + r);
                            break;
                        }
                        got += r.getMsgFoundList().size();
                        offset = r.getNextBeginOffset();
                    }
                    c.updateConsumeOffset(mq, offset);
                    c.getOffsetStore().persist(mq);
                    check(c.fetchConsumeOffset(mq, true) == offset, "stored offset of " + mq);
                }
            } finally {
                c.shutdown();
            }
            check(got == 10, "pulled " + got);
            return "DefaultMQPullConsumer pulled 10 and stored its offsets";
        } finally {
            p.shutdown();
        }
    }

    // ---- queries

    static String queryByKey(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            String key = ctx.name("KEY");
            long begin = System.currentTimeMillis() - 60_000;
            for (int i = 0; i < 3; i++) {
                p.send(msg(ctx, topic, "A", key, "b" + i));
            }
            p.send(msg(ctx, topic, "A", "other", "x"));
            List<MessageExt> found = new ArrayList<>();
            await("3 messages by key", 20, () -> {
                try {
                    found.clear();
                    found.addAll(p.queryMessage(topic, key, 32, begin, System.currentTimeMillis() + 60_000).getMessageList());
                    return found.size() >= 3;
                } catch (Exception e) {
                    return false;
                }
            });
            check(found.size() == 3, "found " + found.size());
            return "queryMessage by key found 3";
        } finally {
            p.shutdown();
        }
    }

    static String view(Driver.Ctx ctx, boolean byOffsetId) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            SendResult r = p.send(msg(ctx, topic, "A", "K", "viewed"));
            MessageExt[] m = new MessageExt[1];
            await("viewMessage", 20, () -> {
                try {
                    m[0] = byOffsetId ? p.viewMessage(r.getOffsetMsgId()) : p.viewMessage(topic, r.getMsgId());
                    return m[0] != null;
                } catch (Exception e) {
                    return false;
                }
            });
            check("viewed".equals(body(m[0])), "body " + body(m[0]));
            check(r.getMsgId().equals(m[0].getMsgId()), "msgId " + m[0].getMsgId());
            return byOffsetId ? "viewMessage(offsetMsgId) returned the message" : "viewMessage(topic, uniqId) returned the message";
        } finally {
            p.shutdown();
        }
    }

    static String trace(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.start(ctx, new DefaultMQProducer(ctx.name("PG"), true), "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            SendResult r = p.send(msg(ctx, topic, "A", "K", "traced"));
            Clients.Collector c = new Clients.Collector();
            DefaultMQPushConsumer consumer = Clients.configure(ctx, new DefaultMQPushConsumer(ctx.name("CG"), true), "c");
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener(c);
            consumer.start();
            try {
                c.awaitDistinct(1, 30);
                Set<String> kinds = new HashSet<>();
                await("Pub, SubBefore and SubAfter trace records (have " + kinds + ")", 30, () -> {
                    try {
                        for (MessageExt t : p.queryMessage("RMQ_SYS_TRACE_TOPIC", r.getMsgId(), 32, 0, System.currentTimeMillis() + 60_000).getMessageList()) {
                            // records are separated by \u0002, fields by \u0001; the first is the type
                            for (String record : body(t).split("\u0002")) {
                                kinds.add(record.split("\u0001")[0].trim());
                            }
                        }
                    } catch (Exception e) {
                        return false;
                    }
                    return kinds.containsAll(Set.of("Pub", "SubBefore", "SubAfter"));
                });
            } finally {
                consumer.shutdown();
            }
            return "trace records Pub, SubBefore, SubAfter in RMQ_SYS_TRACE_TOPIC";
        } finally {
            p.shutdown();
        }
    }

    static String namespace(Driver.Ctx ctx) throws Exception {
        String ns = ctx.name("NS");
        String topic = "Orders";
        DefaultMQProducer p = new DefaultMQProducer(ctx.name("PG"), Clients.hook(ctx));
        p.setNamespace(ns);
        Clients.start(ctx, p, "p");
        DefaultMQProducer plain = Clients.producer(ctx, "plain");
        try {
            for (int i = 0; i < 5; i++) {
                SendResult r = p.send(msg(ctx, topic, "A", "K" + i, "b" + i));
                check(r.getSendStatus() == SendStatus.SEND_OK, "status " + r);
            }
            check(!plain.fetchPublishMessageQueues(ns + "%" + topic).isEmpty(), "topic stored as " + ns + "%" + topic);
            Clients.Collector c = new Clients.Collector();
            DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, "CG", "c");
            consumer.setNamespace(ns);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener(c);
            consumer.start();
            try {
                c.awaitDistinct(5, 30);
            } finally {
                consumer.shutdown();
            }
            for (MessageExt m : c.distinct.values()) {
                check(topic.equals(m.getTopic()), "namespace stripped: " + m.getTopic());
            }
            return "namespace " + ns + ": topic " + ns + "%Orders, seen as Orders";
        } finally {
            plain.shutdown();
            p.shutdown();
        }
    }

    static String dlq(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        String group = ctx.name("CG");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            String key = ctx.name("KEY");
            p.send(msg(ctx, topic, "A", key, "poison"));
            AtomicInteger deliveries = new AtomicInteger();
            DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, group, "c");
            consumer.setMaxReconsumeTimes(1);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                deliveries.addAndGet(msgs.size());
                context.setDelayLevelWhenNextConsume(1);  // 1 s back-off keeps the test short
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            });
            consumer.start();
            List<MessageExt> dead = new ArrayList<>();
            try {
                await("the message in %DLQ%" + group, 40, () -> {
                    try {
                        dead.clear();
                        dead.addAll(p.queryMessage("%DLQ%" + group, key, 32, 0, System.currentTimeMillis() + 60_000).getMessageList());
                        return !dead.isEmpty();
                    } catch (Exception e) {
                        return false;
                    }
                });
            } finally {
                consumer.shutdown();
            }
            check(deliveries.get() == 2, "deliveries before the DLQ: " + deliveries.get());
            MessageExt d = dead.get(0);
            check("poison".equals(body(d)), "DLQ body " + body(d));
            check(topic.equals(d.getProperty("RETRY_TOPIC")), "RETRY_TOPIC " + d.getProperties());
            return "maxReconsumeTimes 1: 2 deliveries, then %DLQ% holds it";
        } finally {
            p.shutdown();
        }
    }

    /**
     * 20 messages pocketmq's Python SDK sent to {@code T_sdk_produced_<run id>} before this run
     * (tags FromSdk, keys sdk-i, property origin=pocketmq-sdk, every 5th body 6 KiB and sent
     * zlib-compressed) arrive whole.
     */
    static String sdkProduced(Driver.Ctx ctx) throws Exception {
        Clients.Collector c = consumeAll(ctx, ctx.name("T"), "FromSdk", 20, 30);
        for (MessageExt m : c.distinct.values()) {
            int i = Integer.parseInt(m.getKeys().substring("sdk-".length()));
            String want = ("sdk-" + i + " ").repeat(i % 5 == 0 ? 1000 : 1);
            check(want.equals(body(m)), "body of sdk-" + i + ": " + m.getBody().length + " bytes");
            check("pocketmq-sdk".equals(m.getUserProperty("origin")), "origin " + m.getProperties());
        }
        return "20 SDK-sent messages (4 compressed) consumed whole";
    }
}
