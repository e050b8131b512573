"""Receive and acknowledge TOPIC's messages as consumer group GROUP with Apache RocketMQ's Python client, through a
RocketMQ 5 Proxy whose NameServer is rmq-namesrv, until Ctrl-C.
Usage: python examples/python/consumer.py TOPIC GROUP  (the Proxy: $ROCKETMQ_ENDPOINTS)"""

import os
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

endpoints = os.environ.get("ROCKETMQ_ENDPOINTS", "127.0.0.1:8081")  # the Proxy's gRPC port; several: "a:8081;b:8081"
topic, group = sys.argv[1], sys.argv[2]

# await_duration: how long one receive waits for a message (long polling). The client asks one broker per call, its
# queues in turn: a short wait keeps an idle broker from holding up the others (the default is 20 s)
consumer = SimpleConsumer(ClientConfiguration(endpoints, Credentials()), group, {topic: FilterExpression("*")},
                          await_duration=5)
consumer.startup()
print(f"consumer {group} subscribed to {topic} at {endpoints}", flush=True)
try:
    while True:
        try:
            # up to 32 messages; each stays invisible to the group for 15 s, then it is delivered again unless
            # acknowledged
            messages = consumer.receive(32, 15)
        except Exception as e:  # e.g. right after startup, before the Proxy has this client's settings
            print("receive failed, retrying:", e, flush=True)
            time.sleep(1)
            continue
        for msg in messages:
            print("received", ",".join(sorted(msg.keys)), msg.message_id, flush=True)
            consumer.ack(msg)
except KeyboardInterrupt:
    pass
finally:
    consumer.shutdown()
