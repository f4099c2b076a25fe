"""asyncio wiring of the pure core to the Kubernetes edge (reflectors, queues, workers)."""
