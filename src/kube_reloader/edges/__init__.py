"""The HTTP edges: what listens (`serving`: /metrics, /live and the health listener;
`tlsserving`: TLS counted from the first byte; `admitserving`: the admission webhook's fair
stages) and what the controller sends out over HTTP besides the API server (`alerts`: alert
sinks and webhook mode). Every limit here is shared fairly among the clients that reach it."""
