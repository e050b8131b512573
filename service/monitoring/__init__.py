"""What operators watch: the Prometheus alerting and recording rules and the Grafana dashboard, kept here as one
source and rendered (`python -m service.monitoring`) to the files under helm/monitoring/ and the chart's
PrometheusRule template."""
