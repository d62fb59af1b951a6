"""`obc lock`: the image tags of run files into their digests in obc.lock. The only package that
opens a network connection (registry.py: the registry's HTTP API, or skopeo). Imports pipeline
and everything below it; never plan or cli."""
