"""A sweep's processes on a Ray cluster (``--cluster``): ``address`` checks the address,
``place.RayPlace`` is the sweep's side, ``client`` holds the connection in a process of its own,
``task`` runs one process on a worker. Nothing here imports Ray at import time: only the
client's process and the tasks do (the [cluster] extra). docs/cluster.md says how to use it."""
