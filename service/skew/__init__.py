"""Topic load skew: snapshots in Redis read by a PySpark job, reported as files, HTML and JSON."""
