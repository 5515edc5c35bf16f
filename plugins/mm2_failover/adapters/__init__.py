"""What talks to the world: Kafka, the run folder and the object store, locks, Spark, settings."""
