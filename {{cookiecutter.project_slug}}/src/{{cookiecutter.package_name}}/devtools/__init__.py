"""The tooling wing: what develops, tests and measures the job, kept apart from it. The job's
own modules never import from here, and `deploy/spark-submit.sh` leaves it out of the code it
ships, so a cluster runs only the job.

- `kafka_local`: a real single-node Kafka for tests and the demo (Maven jars or a container)
- `sample`, `readback`, `verify`: events with their expected counts, the independent
  `read_committed` reader, and the exactly-once verdict
- `chaos`: the fault-schedule runner; `bench`: the benchmarks; `demo`: the local demo
"""
