"""Stage 1, read: the bytes of a run file, and of every file it names, into plain data with the
position of every value. The YAML screen and loader, the project's files (`files:`, Axolotl
configs, obc.lock) bounded to the project. Leaves a `Source` for validate and sweep. Imports
core and model (the runtimes whose images and paths a config names)."""
