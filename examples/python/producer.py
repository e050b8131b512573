"""Send COUNT messages to TOPIC with Apache RocketMQ's Python client, through a RocketMQ 5 Proxy whose NameServer
is rmq-namesrv. Usage: python examples/python/producer.py TOPIC [COUNT]  (the Proxy: $ROCKETMQ_ENDPOINTS)"""

import os
import sys

from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoints = os.environ.get("ROCKETMQ_ENDPOINTS", "127.0.0.1:8081")  # the Proxy's gRPC port; several: "a:8081;b:8081"
topic = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 10

producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,))
producer.startup()  # reads the topic's route: the Proxy asks the NameServer
try:
    for i in range(count):
        msg = Message()
        msg.topic = topic
        msg.keys = f"py-{i}"
        msg.tag = "example"
        msg.body = f"hello {i}".encode()
        receipt = producer.send(msg)  # returns once the broker has stored it; raises otherwise
        print("sent", f"py-{i}", receipt.message_id, flush=True)
finally:
    producer.shutdown()
