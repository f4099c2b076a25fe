"""The only layer that talks to the Kubernetes API server.

A small asyncio client on aiohttp with msgspec decoding: kubeconfig and in-cluster
credentials (`config`), typed requests (`client`), resource paths (`resources`), an error
taxonomy owned by the project (`errors`) and a LIST+WATCH reflector (`watching`).
"""
