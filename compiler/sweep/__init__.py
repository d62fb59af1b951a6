"""Stage 1b, sweep: a run file with a `matrix` into one `Source` per run, as if each run were a
run file of its own, and the rules of the sweep as a whole (ids, shared folders). Imports core,
model, read and validate (each run's matrix is checked as it is expanded)."""
