"""Running the query: supervision, restarts and the clean stop (runner.py), the driver's
heartbeat (heartbeat.py), Kafka outages waited out (outage.py), Spark's progress
reports (progress_reports.py)."""
