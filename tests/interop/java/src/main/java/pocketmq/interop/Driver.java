package pocketmq.interop;

import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * The Java interop driver: runs named scenarios with Apache RocketMQ's Java client (4.9.8) against
 * one name server, several at once in this one JVM (a JVM start costs ~1 s, so scenarios are
 * grouped per process). Every scenario uses topics and groups of its own.
 *
 * <p>Usage: {@code Driver --namesrv HOST:PORT --scenarios a,b,c [--run-id ID] [--parallel N]
 * [--timeout-s S] [--access-key AK --secret-key SK]}.
 *
 * <p>stdout carries only JSON lines: one {@code {"event":"result","scenario","ok","detail","ms"}}
 * per scenario, then {@code {"event":"summary","passed","failed"}}. Exit code 0 when every
 * scenario passed, 1 otherwise, 2 on a usage error.
 */
public final class Driver {
    private Driver() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                usage("unexpected argument " + args[i]);
            }
            opts.put(args[i].substring(2), args[i + 1]);
        }
        if (!opts.containsKey("namesrv") || !opts.containsKey("scenarios")) {
            usage("--namesrv and --scenarios are required");
        }
        Ctx ctx = new Ctx(
                opts.get("namesrv"),
                opts.getOrDefault("run-id", Long.toHexString(System.nanoTime())),
                opts.get("access-key"),
                opts.get("secret-key"));
        int parallel = Integer.parseInt(opts.getOrDefault("parallel", "6"));
        long timeoutS = Long.parseLong(opts.getOrDefault("timeout-s", "90"));
        List<String> names = new ArrayList<>();
        for (String s : opts.get("scenarios").split(",")) {
            if (!s.isBlank()) {
                if (!Scenarios.ALL.containsKey(s.trim())) {
                    usage("unknown scenario " + s + "; known: " + Scenarios.ALL.keySet());
                }
                names.add(s.trim());
            }
        }
        ExecutorService pool = Executors.newFixedThreadPool(parallel);
        Map<String, Future<String>> futures = new LinkedHashMap<>();
        Map<String, Long> elapsedMs = new java.util.concurrent.ConcurrentHashMap<>();
        for (String name : names) {
            Scenario body = Scenarios.ALL.get(name);
            futures.put(name, pool.submit(() -> {
                long t0 = System.nanoTime();
                try {
                    return body.run(ctx.scoped(name));
                } finally {
                    elapsedMs.put(name, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
                }
            }));
        }
        int passed = 0;
        int failed = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
        for (Map.Entry<String, Future<String>> e : futures.entrySet()) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("event", "result");
            line.put("scenario", e.getKey());
            try {
                String detail = e.getValue().get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                line.put("ok", true);
                line.put("detail", detail);
                passed++;
            } catch (java.util.concurrent.TimeoutException te) {
                line.put("ok", false);
                line.put("detail", "driver timeout after " + timeoutS + " s");
                e.getValue().cancel(true);
                failed++;
            } catch (java.util.concurrent.ExecutionException ee) {
                Throwable cause = ee.getCause();
                line.put("ok", false);
                line.put("detail", describe(cause));
                failed++;
            }
            line.put("ms", elapsedMs.getOrDefault(e.getKey(), -1L));  // -1: still running (timed out)
            emit(line);
        }
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("event", "summary");
        summary.put("passed", passed);
        summary.put("failed", failed);
        emit(summary);
        System.out.flush();
        // client threads (netty, rebalance) of a failed scenario may linger: do not wait for them
        Runtime.getRuntime().halt(failed == 0 ? 0 : 1);
    }

    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null && sb.length() < 2000; c = c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return sb.toString();
    }

    static synchronized void emit(Map<String, Object> line) {
        System.out.println(JSON.toJSONString(line));
        System.out.flush();
    }

    private static void usage(String why) {
        System.err.println("usage: Driver --namesrv ADDR --scenarios a,b [--run-id ID] [--parallel N] "
                + "[--timeout-s S] [--access-key AK --secret-key SK]: " + why);
        System.exit(2);
    }

    /** What every scenario gets: the name server and names unique to this run and scenario. */
    static final class Ctx {
        final String namesrv;
        final String runId;
        final String accessKey;
        final String secretKey;
        final String scenario;

        Ctx(String namesrv, String runId, String accessKey, String secretKey) {
            this(namesrv, runId, accessKey, secretKey, "");
        }

        private Ctx(String namesrv, String runId, String accessKey, String secretKey, String scenario) {
            this.namesrv = namesrv;
            this.runId = runId;
            this.accessKey = accessKey;
            this.secretKey = secretKey;
            this.scenario = scenario;
        }

        Ctx scoped(String name) {
            return new Ctx(namesrv, runId, accessKey, secretKey, name);
        }

        /** A topic or group name unique to this run and scenario (letters, digits, '_' only). */
        String name(String kind) {
            return (kind + "_" + scenario + "_" + runId).replaceAll("[^A-Za-z0-9_]", "_");
        }

        byte[] body(String s) {
            return s.getBytes(StandardCharsets.UTF_8);
        }
    }

    @FunctionalInterface
    interface Scenario {
        String run(Ctx ctx) throws Exception;
    }
}
