"""The streaming query's steps, in the JVM: parse, filter, count by key, and the counts and dead
letters as Kafka records. Nothing here knows of Kafka transactions (that is the sink's)."""
