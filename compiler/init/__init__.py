"""`obc init`: a commented run file beside each trainer config, for the trainer the config's
keys name. Enters: trainer config files. Leaves: run files, written only where no file is.
Imports read (the config, read as compile reads it), model (the trainers, the defaults) and
core; never cli."""
