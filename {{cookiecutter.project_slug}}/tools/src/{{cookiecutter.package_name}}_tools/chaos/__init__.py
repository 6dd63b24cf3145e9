"""`chaos`: disrupt the job for real while it processes a known input, then check what a
read_committed consumer sees against that input, with a verifier that shares nothing with
the job but the topic names.

Disruptions, at moments drawn from `--seed` (printed first):
  - SIGKILL of the driver's process group (and its Python workers): a lost machine;
  - every fault-injection point of the sink (sink/faults.py), each a driver kill at a
    named step of the commit protocol, armed a few batches ahead of the last committed one;
  - SIGKILL of one Spark Python worker alone, when the job runs any (the at-least-once
    sink's tasks, the TTL count): the runner restarts the query in-process;
  - kill -9 of the Kafka broker and a restart on the same data; with `--kafka-brokers 3`, of
    one broker of a local three-broker cluster, each in turn (kafka_local/cluster.py);
  - the soak profile adds, on three brokers: SIGKILLs the moment a run's first output record is
    visible; zombie drivers (frozen with SIGSTOP at a point of the commit protocol or at a random
    moment, a replacement started on the checkpoint, woken 20-60 s later: each must stop in one
    line, publishing nothing); the leader of an output partition, the sink's transaction
    coordinator, two nodes at once killed; a rolling restart; a node and the coordinator hung
    (SIGSTOP) past the clients' time-outs; the input topic grown; aborted transactions in the
    input; three commit shards; runs that publish from Spark tasks (plan.py).
With `--cluster`, the job runs on a local Spark standalone cluster (a master and two workers,
spark_cluster.py), submitted by deploy/spark-submit.sh, its checkpoint on a local S3 server
(s3_local); a worker kill is then a SIGKILL of a Spark worker and its executor (Spark runs the
lost tasks elsewhere; the worker comes back), and the S3 server is killed and restarted too.
The input (skewed keys, a share of malformed records) is produced in chunks while the job
runs. After each kill the job is started again from its checkpoint, until every input
record is in a committed batch. The seed reproduces the plan (order, batches, which run
loses what); the exact interleaving still depends on timing.

The last line printed is machine-readable:
  chaos: seed=S guarantee=G records=N kills=K broker_restarts=B faults=F lost=L duplicated=D dead_letter_ok=...

The package: plan (the seeded schedule), disruptions, input, runner, verdict. Imported by cli.py
to build its parser: nothing heavy (pyspark, Kafka clients) at the top of any of its modules.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from .plan import PROFILES
from .report import Reporter
from .verdict import VERDICT_LINE

GUARANTEES = ("exactly-once", "at-least-once")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                        help="quick: 20,000 events, every fault point once (minutes); "
                             "smoke: quick with three fault points, chosen by the seed; "
                             "long: 200,000 events over 8 partitions, more kills; "
                             "soak: 1,000,000 events, over 100 driver kills, zombies, every broker fault "
                             "(run it with --kafka-brokers 3)")
    parser.add_argument("--guarantee", choices=GUARANTEES, default="exactly-once",
                        help="the sink's delivery guarantee under test")
    parser.add_argument("--seed", type=int, help="seed of every random choice (default: a random one, printed)")
    parser.add_argument("--workdir", help="checkpoint, job logs and broker data (default: a new temporary directory)")
    parser.add_argument("--kafka-provider", choices=("auto", "env", "testcontainers", "process"),
                        help="where the broker comes from (default: $KAFKA_PROVIDER, else auto); "
                             "broker restarts need testcontainers or process")
    parser.add_argument("--kafka-brokers", type=int, choices=(1, 3), default=1,
                        help="3: a local three-broker cluster (replication 3, min.insync.replicas=2), "
                             "its nodes containers or processes as --kafka-provider says, one broker killed "
                             "at a time (default 1)")
{%- if cookiecutter.include_deployment == "yes" %}
    parser.add_argument("--cluster", action="store_true",
                        help="run the job on a local Spark standalone cluster through deploy/spark-submit.sh, "
                             "its checkpoint on a local S3 server; also kill Spark workers and the S3 server")
{%- else %}
    parser.set_defaults(cluster=False)  # the cluster profile submits through deploy/, which this project has not
{%- endif %}


def run(args: argparse.Namespace, kafka: Any = None, out: TextIO | None = None, cluster: Any = None) -> int:
    """Run the chaos profile; `kafka` is a KafkaHandle to use (the tests pass theirs), else one
    is provided for the duration of the run; likewise, with --cluster, `cluster` is the Spark
    cluster and S3 server to use (a `(SparkCluster, S3Server)` pair), else the run starts its own.
    Progress and the verdict go to `out` (stdout).
    Several runs may share a broker and a process (the tests run both guarantees side by side):
    a broker restart then never overlaps another run's topic creation or verification."""
    from .disruptions import ClusterSetup
    from .runner import Chaos

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="chaos-"))
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    say = Reporter(out or sys.stdout)
    say(f"seed={seed} profile={args.profile} guarantee={args.guarantee} workdir={workdir}"
        + (" cluster=standalone+s3" if getattr(args, "cluster", False) else ""))
    with contextlib.ExitStack() as stack:
        setup = None
        if getattr(args, "cluster", False):
            setup = ClusterSetup.on(*cluster) if cluster else stack.enter_context(ClusterSetup.started(workdir, say))
        if kafka is None:
            from ..kafka_local import provide_kafka, provide_kafka_cluster

            broker_dir = workdir / "kafka"
            broker_dir.mkdir(exist_ok=True)
            brokers = getattr(args, "kafka_brokers", 1)
            kafka = stack.enter_context(provide_kafka_cluster(broker_dir, brokers, args.kafka_provider) if brokers > 1
                                        else provide_kafka(broker_dir, provider=args.kafka_provider))
            say(kafka.describe())
        return Chaos(kafka, PROFILES[args.profile], args.guarantee, seed, workdir, say, setup,
                     _registry_for_avro(workdir, say, stack)).run()


def _registry_for_avro(workdir: Path, say: Reporter, stack: contextlib.ExitStack) -> str | None:
    """Where the job file's values are Avro: a schema registry of the run's own, stopped after it."""
    from ..job_file import query_config

    if not query_config().uses_registry:
        return None
    from ..schema_registry import SchemaRegistry

    registry = SchemaRegistry(workdir / "registry", jvm_options=os.environ.get("KAFKA_OPTS", ""))
    seconds = registry.start(log=say)
    stack.callback(registry.stop)
    say(f"schema registry: Apicurio at {registry.url}, up in {seconds:.1f}s")
    return registry.url


__all__ = ["GUARANTEES", "PROFILES", "VERDICT_LINE", "add_arguments", "run"]
