package rmqinterop.grpc;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * Apache's Java gRPC client (rocketmq-client-java) through a RocketMQ Proxy, every piece in this one JVM (one
 * start-up for all): a PushConsumer and a SimpleConsumer (groups of their own, so each gets every message), then a
 * Producer sending `--count` messages with keys `<prefix>-0 ..`, `--interval-ms` apart.
 *
 * Lines: `STARTED` once both consumers run; `OK key messageId` per acknowledged send, `FAIL key reason` per failed
 * attempt (a failed key is tried again until `--timeout-s` runs out; then `GAVEUP key`); `SENT ok=N` when the
 * producer is through; `RECV push|simple key messageId` per delivery. The consumers run until `stop` arrives on
 * standard input (or the deadline): the harness stops them once what they received covers what was acknowledged,
 * by whichever producer. Then `DONE`, and the JVM exits.
 *
 * `--probe-topic T --probe-endpoints a;b`: first, for each endpoint, a send to T and a SimpleConsumer subscribed to
 * T, each line `PROBE endpoint send|simple <exception class> <message>` (request ids masked): the missing-topic
 * error each Proxy's NameServer leads the client to.
 */
public final class GrpcClients {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        long deadline = System.currentTimeMillis() + 1000L * Integer.parseInt(args.getOrDefault("timeout-s", "180"));
        if (args.containsKey("probe-topic")) {
            for (String endpoint : args.get("probe-endpoints").split(";")) {
                probe(endpoint, args.get("probe-topic"));
            }
        }
        if (!args.containsKey("topic")) {
            System.out.println("DONE");
            System.out.flush();
            System.exit(0);
        }
        String topic = args.get("topic");
        ClientConfiguration config = config(args.get("endpoint"));
        Map<String, FilterExpression> sub = Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG));

        PushConsumer push = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(args.get("push-group")).setSubscriptionExpressions(sub)
            .setMessageListener(view -> {
                print("RECV push " + key(view) + " " + view.getMessageId());
                return ConsumeResult.SUCCESS;
            }).build();
        SimpleConsumer simple = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(args.get("simple-group")).setSubscriptionExpressions(sub)
            .setAwaitDuration(Duration.ofSeconds(2)).build();
        print("STARTED");

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                    // wait for `stop`
                }
            } catch (Exception ignored) {
                // standard input closed: stop too
            }
            stop.set(true);
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        Thread producing = new Thread(() -> produce(config, topic, args, deadline), "producer");
        producing.start();

        while (!stop.get() && System.currentTimeMillis() < deadline) {
            try {
                List<MessageView> views = simple.receive(16, Duration.ofSeconds(30));
                for (MessageView view : views) {
                    print("RECV simple " + key(view) + " " + view.getMessageId());
                    simple.ack(view);
                }
            } catch (Exception e) {
                print("RECVFAIL simple " + flat(e));
                Thread.sleep(200);
            }
        }
        producing.join(TimeUnit.SECONDS.toMillis(30));
        simple.close();
        print("DONE");
        // PushConsumer.close() takes about 21 s whatever the NameServer (it waits out its long polls): every
        // delivery this run reports was acknowledged by the listener already, so the JVM ends without waiting.
        Thread closing = new Thread(() -> {
            try {
                push.close();
            } catch (Exception ignored) {
                // exiting anyway
            }
        }, "push-close");
        closing.setDaemon(true);
        closing.start();
        closing.join(1000);
        Runtime.getRuntime().halt(0);
    }

    private static void produce(ClientConfiguration config, String topic, Map<String, String> args, long deadline) {
        String prefix = args.getOrDefault("prefix", "jg");
        int count = Integer.parseInt(args.getOrDefault("count", "100"));
        int intervalMs = Integer.parseInt(args.getOrDefault("interval-ms", "0"));
        int ok = 0;
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
            for (int i = 0; i < count; i++) {
                String key = prefix + "-" + i;
                while (true) {
                    try {
                        SendReceipt receipt = producer.send(PROVIDER.newMessageBuilder().setTopic(topic).setKeys(key)
                            .setTag("interop").setBody(("body of " + key).getBytes(StandardCharsets.UTF_8)).build());
                        print("OK " + key + " " + receipt.getMessageId());
                        ok++;
                        break;
                    } catch (Exception e) {
                        print("FAIL " + key + " " + flat(e));
                    }
                    if (System.currentTimeMillis() > deadline) {
                        print("GAVEUP " + key);
                        break;
                    }
                    Thread.sleep(200);
                }
                if (intervalMs > 0) {
                    Thread.sleep(intervalMs);
                }
            }
        } catch (Exception e) {
            print("PRODUCERFAIL " + flat(e));
        }
        print("SENT ok=" + ok);
    }

    private static void probe(String endpoint, String topic) {
        ClientConfiguration config = config(endpoint);
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config).build()) {
            producer.send(PROVIDER.newMessageBuilder().setTopic(topic).setKeys("probe")
                .setBody("probe".getBytes(StandardCharsets.UTF_8)).build());
            print("PROBE " + endpoint + " send OK");
        } catch (Exception e) {
            print("PROBE " + endpoint + " send " + e.getClass().getName() + " " + flat(e));
        }
        Map<String, FilterExpression> sub = Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG));
        try (SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
                .setConsumerGroup("g_probe").setSubscriptionExpressions(sub).setAwaitDuration(Duration.ofSeconds(1)).build()) {
            print("PROBE " + endpoint + " simple OK");
        } catch (Exception e) {
            // build() fails with "Expected the service SimpleConsumerImpl-<n> [FAILED] to be RUNNING": the reason
            // is its cause
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            print("PROBE " + endpoint + " simple " + cause.getClass().getName() + " " + flat(cause));
        }
    }

    private static ClientConfiguration config(String endpoint) {
        return ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(5)).build();
    }

    private static String key(MessageView view) {
        return String.join(",", view.getKeys());
    }

    /** One line, request ids masked (they differ per call, not per NameServer). */
    private static String flat(Throwable e) {
        return String.valueOf(e.getMessage()).replace('\n', ' ').replaceAll("request-id=[^,\\]]*", "request-id=*");
    }

    private static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            out.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        return out;
    }
}
