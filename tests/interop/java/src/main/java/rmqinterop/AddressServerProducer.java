package rmqinterop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * A producer configured the way a client without addresses is: no namesrvAddr at all, only the JVM property
 * rocketmq.namesrv.domain (and no rocketmq.namesrv.addr / NAMESRV_ADDR), so RocketMQ's client fetches the name
 * servers from the address server (http://domain/rocketmq/nsaddr) when it starts and on its own schedule (10 s
 * after start, then every 2 minutes; neither is configurable). Prints `STARTING millis` just before start(),
 * `STARTED millis` after, `NSADDR millis a;b;c` each time the client's name-server list differs from the last one
 * printed (as the client holds it: MQClientAPIImpl.getNameServerAddressList), and one `OK key brokerName queueId` or
 * `FAIL key reason` per send, one send every `--interval-ms`, until a line `stop` on standard input or
 * `--timeout-s`; then `DONE ok=N failed=M`.
 */
public final class AddressServerProducer {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.get("topic");
        int intervalMs = args.getInt("interval-ms", 500);
        long deadline = System.currentTimeMillis() + 1000L * args.getInt("timeout-s", 300);

        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "interop_nsaddr_producer"));
        producer.setInstanceName(args.get("instance", "nsaddr-" + ProcessHandle.current().pid()));
        producer.setSendMsgTimeout(3000);
        producer.setRetryTimesWhenSendFailed(2);
        if (producer.getNamesrvAddr() != null) {
            throw new IllegalStateException("a name-server address is configured: " + producer.getNamesrvAddr());
        }
        System.out.printf("STARTING %d%n", System.currentTimeMillis());
        producer.start();
        System.out.printf("STARTED %d%n", System.currentTimeMillis());
        System.out.flush();

        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        MQClientAPIImpl api = producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
        String printed = null;
        int ok = 0;
        int failed = 0;
        try {
            for (int i = 0; System.currentTimeMillis() < deadline; i++) {
                List<String> list = api.getNameServerAddressList();
                String now = list == null ? "" : String.join(";", list);
                if (!now.equals(printed)) {
                    System.out.printf("NSADDR %d %s%n", System.currentTimeMillis(), now);
                    printed = now;
                }
                String key = "ns-" + i;
                try {
                    SendResult r = producer.send(new Message(topic, "interop", key,
                        ("body of " + key).getBytes(StandardCharsets.UTF_8)));
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        System.out.printf("OK %s %s %d%n", key, r.getMessageQueue().getBrokerName(),
                            r.getMessageQueue().getQueueId());
                        ok++;
                    } else {
                        System.out.printf("FAIL %s status=%s%n", key, r.getSendStatus());
                        failed++;
                    }
                } catch (Exception e) {
                    System.out.printf("FAIL %s %s%n", key, String.valueOf(e).replace('\n', ' '));
                    failed++;
                }
                System.out.flush();
                if (stdin.ready()) {
                    String line = stdin.readLine();
                    if (line == null || line.trim().equals("stop")) {
                        break;
                    }
                }
                Thread.sleep(intervalMs);
            }
        } finally {
            System.out.printf("DONE ok=%d failed=%d%n", ok, failed);
            System.out.flush();
            producer.shutdown();
        }
        System.exit(0);
    }
}
