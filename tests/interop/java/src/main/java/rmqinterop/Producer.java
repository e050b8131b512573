package rmqinterop;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * Sends `--count` messages with sync send, keys `<prefix>-0 .. <prefix>-(count-1)`, one line per attempt:
 * `OK key msgId brokerName queueId millis offsetMsgId` once acknowledged (SEND_OK; the offset message id names the
 * broker address that stored it), `FAIL key reason` otherwise. A failed key is
 * tried again (after `--retry-ms`) until `--timeout-s` runs out, so every key either ends OK or the run says it
 * gave up; `--interval-ms` spreads the sends out so a kill can land mid-run. With `--stdin-stop true` it also ends,
 * before its next key, when standard input says `stop` (or closes): a producer that sends until the harness is
 * done with it. The harness compares the OK keys with what the consumer received: an acknowledged message must
 * never be missing.
 */
public final class Producer {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.get("topic");
        String prefix = args.get("prefix", "m");
        int count = args.getInt("count", 1000);
        int intervalMs = args.getInt("interval-ms", 0);
        int retryMs = args.getInt("retry-ms", 200);
        long deadline = System.currentTimeMillis() + 1000L * args.getInt("timeout-s", 120);

        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "interop_producer"), Hooks.acl(args));
        producer.setNamesrvAddr(args.get("namesrv"));
        producer.setInstanceName(args.get("instance", "producer-" + ProcessHandle.current().pid()));
        producer.setSendMsgTimeout(args.getInt("send-timeout-ms", 3000));
        producer.setRetryTimesWhenSendFailed(args.getInt("retries", 2));
        producer.setPollNameServerInterval(args.getInt("poll-ms", 30000));
        AtomicBoolean stop = Boolean.parseBoolean(args.get("stdin-stop", "false")) ? Stdin.stopSignal()
            : new AtomicBoolean(false);
        producer.start();
        System.out.println("STARTED");
        System.out.flush();
        int ok = 0;
        int failed = 0;
        try {
            for (int i = 0; i < count && !stop.get(); i++) {
                String key = prefix + "-" + i;
                while (true) {
                    Message msg = new Message(topic, "interop", key, ("body of " + key).getBytes(StandardCharsets.UTF_8));
                    try {
                        SendResult r = producer.send(msg);
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            // then when (ms) and the offset message id, which names the broker address that stored it
                            System.out.printf("OK %s %s %s %d %d %s%n", key, r.getMsgId(),
                                r.getMessageQueue().getBrokerName(), r.getMessageQueue().getQueueId(),
                                System.currentTimeMillis(), r.getOffsetMsgId());
                            ok++;
                            break;
                        }
                        System.out.printf("FAIL %s status=%s%n", key, r.getSendStatus());
                    } catch (Exception e) {
                        System.out.printf("FAIL %s %s%n", key, String.valueOf(e).replace('\n', ' '));
                    }
                    failed++;
                    if (System.currentTimeMillis() > deadline || stop.get()) {
                        System.out.printf("GAVEUP %s%n", key);
                        break;
                    }
                    Thread.sleep(retryMs);
                }
                System.out.flush();
                if (System.currentTimeMillis() > deadline) {
                    break;
                }
                if (intervalMs > 0) {
                    Thread.sleep(intervalMs);
                }
            }
        } finally {
            System.out.printf("DONE ok=%d failed=%d%n", ok, failed);
            System.out.flush();
            producer.shutdown();
        }
        System.exit(0);
    }
}
