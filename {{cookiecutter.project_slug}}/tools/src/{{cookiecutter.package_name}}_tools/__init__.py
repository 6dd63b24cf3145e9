"""The tools that develop, test and measure the job, apart from it: they import the job, the job
never imports them, and the job's wheel does not hold them.

- `kafka_local`, `s3_local`, `spark_cluster`: a real single-node Kafka (Maven jars or a
  container), an S3 server and a Spark standalone cluster, for tests and the demo
- `sample`, `readback`, `verify`: events with their expected counts, the independent
  `read_committed` reader, and the exactly-once verdict
- `chaos`: the fault-schedule runner; `bench`: the benchmarks; `demo`: the local demo
"""
