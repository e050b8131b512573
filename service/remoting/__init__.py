"""RocketMQ native TCP remoting: wire codec, fastjson-style JSON, request bodies and ACL signatures."""
