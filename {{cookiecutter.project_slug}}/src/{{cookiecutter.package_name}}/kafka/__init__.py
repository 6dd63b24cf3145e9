"""Kafka as the job's own clients see it: the [kafka] client settings for confluent-kafka
(client.py), the ACLs the job needs (permissions.py), `topics create` (topics.py)."""
