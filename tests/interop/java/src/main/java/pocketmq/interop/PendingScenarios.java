package pocketmq.interop;

import static pocketmq.interop.Clients.check;
import static pocketmq.interop.Scenarios.body;
import static pocketmq.interop.Scenarios.collect;
import static pocketmq.interop.Scenarios.consumeAll;
import static pocketmq.interop.Scenarios.msg;
import static pocketmq.interop.Scenarios.sendPlain;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Scenarios of the features other issues built or build: transactions, SQL92 and ACL (landed),
 * request-reply and slave reads (marked expected-to-fail by the tests until they land).
 */
final class PendingScenarios {
    private PendingScenarios() {}

    static String requestReply(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer requester = Clients.producer(ctx, "req");
        DefaultMQProducer replier = Clients.producer(ctx, "rep");
        DefaultMQPushConsumer responder = Clients.pushConsumer(ctx, ctx.name("CG"), "c");
        try {
            Clients.ensureTopic(requester, topic, 4);
            responder.subscribe(topic, "*");
            responder.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    try {
                        Message reply = MessageUtil.createReplyMessage(m, ("re:" + body(m)).getBytes(StandardCharsets.UTF_8));
                        replier.send(reply);
                    } catch (Exception e) {
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            responder.start();
            Message answer = requester.request(msg(ctx, topic, "A", "K", "ping"), 10_000);
            String got = new String(answer.getBody(), StandardCharsets.UTF_8);
            check("re:ping".equals(got), "reply " + got);
            return "request() answered re:ping";
        } finally {
            responder.shutdown();
            replier.shutdown();
            requester.shutdown();
        }
    }

    static String sql92(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            Clients.Collector c = new Clients.Collector();
            DefaultMQPushConsumer consumer = Clients.pushConsumer(ctx, ctx.name("CG"), "c");
            consumer.subscribe(topic, MessageSelector.bySql("a BETWEEN 3 AND 5 AND TAGS = 'TagA'"));
            consumer.registerMessageListener(c);
            consumer.start();
            try {
                for (int i = 0; i < 10; i++) {
                    Message m = msg(ctx, topic, i == 4 ? "TagB" : "TagA", "K" + i, "b" + i);
                    m.putUserProperty("a", String.valueOf(i));
                    p.send(m);
                }
                c.awaitDistinct(2, 30);
                Thread.sleep(500);
            } finally {
                consumer.shutdown();
            }
            Set<String> bodies = new HashSet<>();
            for (MessageExt m : c.all()) {
                bodies.add(body(m));
            }
            check(bodies.equals(Set.of("b3", "b5")), "selected " + bodies);
            return "bySql selected b3 and b5 only";
        } finally {
            p.shutdown();
        }
    }

    static String transaction(Driver.Ctx ctx) throws Exception {
        String topic = ctx.name("T");
        TransactionMQProducer p = new TransactionMQProducer(ctx.name("PG"), Clients.hook(ctx));
        AtomicInteger checks = new AtomicInteger();
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                switch ((String) arg) {
                    case "commit":
                        return LocalTransactionState.COMMIT_MESSAGE;
                    case "rollback":
                        return LocalTransactionState.ROLLBACK_MESSAGE;
                    default:
                        return LocalTransactionState.UNKNOW;
                }
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.incrementAndGet();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        Clients.start(ctx, p, "p");
        try {
            Clients.ensureTopic(p, topic, 4);
            Clients.Collector c = new Clients.Collector();
            DefaultMQPushConsumer consumer = collect(ctx, topic, "*", c);
            try {
                for (String what : new String[] {"commit", "rollback", "check"}) {
                    TransactionSendResult r = p.sendMessageInTransaction(msg(ctx, topic, "A", what, what), what);
                    check(r.getSendStatus() == SendStatus.SEND_OK, what + ": " + r);
                }
                c.awaitDistinct(2, 60);
                Thread.sleep(500);
            } finally {
                consumer.shutdown();
            }
            Set<String> bodies = new HashSet<>();
            for (MessageExt m : c.all()) {
                bodies.add(body(m));
            }
            check(bodies.equals(Set.of("commit", "check")), "delivered " + bodies);
            check(checks.get() >= 1, "check-back calls " + checks.get());
            return "commit delivered, rollback dropped, UNKNOW committed by check-back";
        } finally {
            p.shutdown();
        }
    }

    /** ACL: a client signed with the driver's credentials sends and consumes. */
    static String acl(Driver.Ctx ctx) throws Exception {
        check(ctx.accessKey != null, "--access-key required");
        return Scenarios.sync(ctx);
    }

    /** ACL: a wrong secret and an unsigned client are both refused. */
    static String aclDenied(Driver.Ctx ctx) throws Exception {
        check(ctx.accessKey != null, "--access-key required");
        String topic = ctx.name("T");
        List<String> refused = new ArrayList<>();
        Driver.Ctx wrong = new Driver.Ctx(ctx.namesrv, ctx.runId, ctx.accessKey, ctx.secretKey + "x").scoped(ctx.scenario + "w");
        Driver.Ctx unsigned = new Driver.Ctx(ctx.namesrv, ctx.runId, null, null).scoped(ctx.scenario + "u");
        for (Driver.Ctx who : new Driver.Ctx[] {wrong, unsigned}) {
            DefaultMQProducer p = Clients.producer(who, "p");
            p.setRetryTimesWhenSendFailed(0);
            try {
                p.send(msg(ctx, topic, "A", "K", "denied"));
            } catch (Exception e) {
                refused.add(who.accessKey == null ? "unsigned" : "wrong secret");
            } finally {
                p.shutdown();
            }
        }
        check(refused.size() == 2, "refused only " + refused);
        return "refused: " + refused;
    }

    /** HA, part 1: send to the master (the test then stops it). */
    static String slaveProduce(Driver.Ctx ctx) throws Exception {
        DefaultMQProducer p = Clients.producer(ctx, "p");
        try {
            String topic = "SlaveRead_" + ctx.runId;
            Clients.ensureTopic(p, topic, 4);
            sendPlain(ctx, p, topic, 10);
            return "10 sent to the master";
        } finally {
            p.shutdown();
        }
    }

    /** HA, part 2: with the master down, a consumer reads all 10 from the slave. */
    static String slaveConsume(Driver.Ctx ctx) throws Exception {
        Clients.Collector c = consumeAll(ctx, "SlaveRead_" + ctx.runId, "*", 10, 40);
        return "10 consumed from the slave";
    }
}
