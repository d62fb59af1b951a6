"""The normalised job: plain, frozen, typed data with every default applied (job.py), the
runtimes its steps run in (runtimes.py, one variant each, with what that runtime adds to a
command line), its Slurm part, the options `docker run` and `podman run` accept, the GPU-hours
it asks for, and every default in one place (defaults.py). Enters from normalise, leaves for
render, plan and the policy. Imports only core."""
