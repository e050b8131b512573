package rmqinterop;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A push consumer from the first offset: one line `RECV key brokerName queueId msgId` per delivery (duplicates
 * included, the harness counts distinct keys). It stops when standard input says `stop` (or closes), or by
 * itself after `--timeout-s`; `--expect N` makes it stop once N distinct keys arrived.
 */
public final class Consumer {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        int expect = args.getInt("expect", 0);
        long deadline = System.currentTimeMillis() + 1000L * args.getInt("timeout-s", 300);
        Set<String> seen = ConcurrentHashMap.newKeySet();

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group", "interop_consumer"), Hooks.acl(args),
            new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName(args.get("instance", "consumer-" + ProcessHandle.current().pid()));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(args.getInt("poll-ms", 30000));
        consumer.subscribe(args.get("topic"), "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            StringBuilder out = new StringBuilder();
            for (MessageExt m : msgs) {
                out.append(String.format("RECV %s %s %d %s%n", m.getKeys(), m.getBrokerName(), m.getQueueId(), m.getMsgId()));
                seen.add(m.getKeys());
            }
            synchronized (System.out) {
                System.out.print(out);
                System.out.flush();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        System.out.println("STARTED");
        System.out.flush();

        AtomicBoolean stop = Stdin.stopSignal();
        while (!stop.get() && System.currentTimeMillis() < deadline && (expect == 0 || seen.size() < expect)) {
            Thread.sleep(100);
        }
        System.out.printf("DONE distinct=%d%n", seen.size());
        System.out.flush();
        consumer.shutdown();
        System.exit(0);
    }
}
