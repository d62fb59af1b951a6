"""Stage 4, render: a `Job` into the text of its job.sh, and a sweep's sweep.sh and runs.tsv,
from the Jinja templates: the summary a reviewer reads first, the record of the job's meaning
at its end, the hash of its inputs, and the shape of a script (its text with values replaced)
that shellcheck checks. The only package that imports jinja2. Imports every stage below it;
never check, pipeline or above."""
