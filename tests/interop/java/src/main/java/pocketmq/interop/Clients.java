package pocketmq.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/** Client construction and waiting helpers shared by the scenarios. */
final class Clients {
    private Clients() {}

    /** The ACL hook when the run has credentials, else null (an unsigned client). */
    static RPCHook hook(Driver.Ctx ctx) {
        if (ctx.accessKey == null) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(ctx.accessKey, ctx.secretKey));
    }

    /**
     * A started producer. Every client gets an instance name of its own: clients of one JVM with
     * the same client id share one MQClientInstance (and the first one's RPC hook).
     */
    static DefaultMQProducer producer(Driver.Ctx ctx, String role) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(ctx.name("PG_" + role), hook(ctx));
        return start(ctx, p, role);
    }

    static DefaultMQProducer start(Driver.Ctx ctx, DefaultMQProducer p, String role) throws Exception {
        p.setNamesrvAddr(ctx.namesrv);
        p.setInstanceName(ctx.name("I_" + role));
        p.setSendMsgTimeout(10_000);
        p.start();
        return p;
    }

    /** A push consumer (not started) reading from the first offset. */
    static DefaultMQPushConsumer pushConsumer(Driver.Ctx ctx, String group, String role) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook(ctx), new AllocateMessageQueueAveragely());
        return configure(ctx, c, role);
    }

    static DefaultMQPushConsumer configure(Driver.Ctx ctx, DefaultMQPushConsumer c, String role) {
        c.setNamesrvAddr(ctx.namesrv);
        c.setInstanceName(ctx.name("I_" + role));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setConsumeThreadMin(2);
        c.setConsumeThreadMax(4);
        return c;
    }

    /** Creates {@code topic} through the TBW102 route and waits until the name server routes it. */
    static List<MessageQueue> ensureTopic(DefaultMQProducer p, String topic, int queues) throws Exception {
        p.createTopic("TBW102", topic, queues);
        return waitRoute(p, topic);
    }

    static List<MessageQueue> waitRoute(DefaultMQProducer p, String topic) throws Exception {
        long deadline = System.currentTimeMillis() + 20_000;
        while (true) {
            try {
                List<MessageQueue> mqs = p.fetchPublishMessageQueues(topic);
                if (!mqs.isEmpty()) {
                    return mqs;
                }
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no route for " + topic, e);
                }
            }
            Thread.sleep(100);
        }
    }

    /** Polls {@code cond} every 50 ms until it holds; fails with {@code what} after {@code seconds}. */
    static void await(String what, long seconds, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out after " + seconds + " s waiting for " + what);
            }
            Thread.sleep(50);
        }
    }

    static void check(boolean cond, String what) {
        if (!cond) {
            throw new IllegalStateException("check failed: " + what);
        }
    }

    /** Everything a concurrently-consuming listener saw, keyed by the client's message id. */
    static final class Collector implements MessageListenerConcurrently {
        final ConcurrentLinkedQueue<MessageExt> deliveries = new ConcurrentLinkedQueue<>();
        final Map<String, MessageExt> distinct = new ConcurrentHashMap<>();
        final Map<String, Long> receivedAt = new ConcurrentHashMap<>();

        @Override
        public ConsumeConcurrentlyStatus consumeMessage(
                List<MessageExt> msgs, org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext ctx) {
            for (MessageExt m : msgs) {
                deliveries.add(m);
                distinct.putIfAbsent(m.getMsgId(), m);
                receivedAt.putIfAbsent(m.getMsgId(), System.currentTimeMillis());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        }

        void awaitDistinct(int n, long seconds) throws InterruptedException {
            await(n + " distinct messages (have " + distinct.size() + ")", seconds, () -> distinct.size() >= n);
        }

        Set<String> ids() {
            return distinct.keySet();
        }

        List<MessageExt> all() {
            return new ArrayList<>(deliveries);
        }
    }
}
