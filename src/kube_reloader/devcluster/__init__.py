"""A real local Kubernetes control plane for tests, the demo, benchmarks and trying annotations.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok are built from the Go
module proxy into a per-version cache outside the repository (`building`), given their own
PKI and credentials (`pki`), and run as background processes on free loopback ports whose PIDs
are recorded in a state directory (`cluster`), so `down` can stop exactly what `up` started.
"""
