-- POST a heartbeat of one registered broker (cluster BenchCluster, address 10.1.0.0:10911).
wrk.method = "POST"
wrk.path = "/v1/brokers/heartbeat"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"clusterName":"BenchCluster","brokerName":"bench-0","brokerId":0,"brokerAddr":"10.1.0.0:10911",' ..
           '"dataVersion":{"timestamp":1,"counter":1,"stateVersion":0}}'
