"""kube-reloader: restart Kubernetes workloads when the ConfigMaps and Secrets they use change."""

__version__ = "0.1.0"
