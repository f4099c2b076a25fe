"""The only layer that talks to the Kubernetes API server.

A small asyncio client on its own HTTP/1.1 wire (`wire`, httptools) with msgspec decoding:
kubeconfig and in-cluster credentials (`config`; files read in `kubeconfig`, self-refreshing
`credentials`, the proxy chosen in `proxies`), typed requests (`client`, composed of a
`transport` for connections, with `tls`, a `paging` pager for LIST and a `streams` watcher for
WATCH), resource paths (`resources`), an error taxonomy owned by the project (`errors`) and a
LIST+WATCH reflector (`watching`).
"""
