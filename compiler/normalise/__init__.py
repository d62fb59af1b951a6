"""Stage 3, normalise: valid run-file data (and the files it names) into a `Job` of the model,
defaults applied from model/defaults.py. Input has passed validation, so nothing here reports
problems. Imports core, model and read."""
