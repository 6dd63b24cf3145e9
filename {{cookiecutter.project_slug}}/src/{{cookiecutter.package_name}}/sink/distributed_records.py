"""Phase 1 for a batch published by Spark tasks: the batch's records stay on the executors,
cached as the query computed them; the driver receives only each shard's figures (rows and
digest), never a record.

    records (partitioned as the query left them) ─ persist
      job 1: per shard, count and digest (the state stage runs here, once, and fills the cache)
      job 2: publishing_tasks.py: task s publishes shard s's records, read from the cache

With one commit shard no shuffle moves the records: the publishing task reads the cached batch
(`by_shard`); with several, a shuffle puts shard s's records in task s's partition.

Why cached on the executors, not staged under the checkpoint: staging costs a write and two
reads of the whole batch through storage, and Python on the executors would need their own
credentials for it; a cached block that an executor loses is recomputed from the same
`offsets/N` and state version, as a Spark task retry does, and the publishing task checks the
recomputed records against the figures before it commits (shard_transaction.RecomputedDifferently).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .batch_records import DIGEST, SHARD, UINT64_MASK


@dataclass(frozen=True)
class DistributedRecords:
    """A batch's records on the executors: `frame` (columns topic, key, value, record_digest,
    commit_shard), cached until `release`."""

    frame: DataFrame
    rows_per_shard: list[int]
    digests: list[int]
    size_bytes: int  # of the records' topics, keys and values
    read_back_keys: list[bytes] = field(default_factory=list)

    def by_shard(self) -> DataFrame:
        """The published records, partition s holding shard s's. One shard: the cached batch read
        by one task, no shuffle. Several: shuffled by a value whose hash partitioning puts shard
        s in partition s (shard_routes); a union of one filtered scan per shard would avoid the
        shuffle, but Spark unions single-partition children partition by partition, into one."""
        published = self.frame.where(F.col("topic").isNotNull())
        shards = len(self.rows_per_shard)
        if shards == 1:
            return published.coalesce(1)
        routes = shard_routes(self.frame.sparkSession, shards)
        return published.repartition(shards, F.element_at(F.array(*(F.lit(r) for r in routes)), F.col(SHARD) + 1))

    def release(self) -> None:
        self.frame.unpersist(blocking=False)


def distribute(records: DataFrame, shards: int) -> DistributedRecords:
    """Cache `records` (with SHARD and DIGEST: kafka_sink.for_commit) on the executors and compute
    each shard's figures: rows and digest of the records with a topic, and the keys of the
    read_back_keys (records without one, few: a batch's dead-letter partitions)."""
    frame = records.persist(StorageLevel.MEMORY_AND_DISK_DESER)
    try:
        rows, digests, size, has_read_backs = figures(frame, shards)
        read_back_keys = [row[0] for row in frame.where(F.col("topic").isNull()).select("key").collect()] \
            if has_read_backs else []
    except BaseException:
        frame.unpersist(blocking=False)
        raise
    return DistributedRecords(frame, rows, digests, size, read_back_keys)


def figures(frame: DataFrame, shards: int) -> tuple[list[int], list[int], int, bool]:
    """Per shard, the rows and digest (batch_records.digest: the sum modulo 2**64 of the records'
    hashes) of the records with a topic, in one Spark job; their bytes; whether any is a read-back request.
    The sum is taken in two 32-bit halves: a sum of 64-bit hashes overflows, which Spark's ANSI
    mode (its default) refuses."""
    digest = F.col(DIGEST)
    read_back = F.col("topic").isNull()
    totals = frame.groupBy(F.col(SHARD), read_back.alias("read_back")).agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(digest.bitwiseAND(F.lit(0xFFFFFFFF))).alias("low"),
        F.sum(F.shiftrightunsigned(digest, 32)).alias("high"),
        F.sum(sum((F.coalesce(F.octet_length(c), F.lit(0)) for c in ("topic", "key", "value")), F.lit(0)))
        .alias("bytes"),
    ).collect()
    rows, digests, size, read_back_keys = [0] * shards, [0] * shards, 0, False
    for total in totals:
        if total["read_back"]:
            read_back_keys = True
            continue
        rows[total[SHARD]] = total["rows"]
        size += int(total["bytes"] or 0)
        digests[total[SHARD]] = (int(total["low"]) + (int(total["high"]) << 32)) & UINT64_MASK
    return rows, digests, size, read_back_keys


_routes: dict[int, list[int]] = {}


def shard_routes(spark: SparkSession, shards: int) -> list[int]:
    """For each shard s, a value that Spark's hash partitioning into `shards` partitions puts in
    partition s (pmod(hash(value), shards), as HashPartitioning does), so that task s of the
    publishing job holds exactly shard s. Computed by Spark itself, on a local relation (no job),
    once per number of shards."""
    if shards not in _routes:
        candidates = spark.createDataFrame([(value,) for value in range(64 * shards)], "value INT")
        placed = candidates.select("value", F.pmod(F.hash("value"), F.lit(shards)).alias("partition")).collect()
        routes: dict[int, int] = {}
        for value, partition in placed:
            routes.setdefault(partition, value)
        if len(routes) != shards:  # not with 64 candidates per partition, but never silently
            raise RuntimeError(f"no value hashes to partitions {sorted(set(range(shards)) - set(routes))} of {shards}")
        _routes[shards] = [routes[shard] for shard in range(shards)]
    return _routes[shards]
