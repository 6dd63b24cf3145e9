"""The Spark session the job runs in (session.py), the connector's jars (resolved_jars.py) and
the driver JVM's class archive (class_archive.py). Their Ivy and log4j2 files are the
package's conf/."""
