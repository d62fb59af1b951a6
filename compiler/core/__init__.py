"""The ground floor: what every stage shares. Diagnostics (located problems and fatal errors),
the text a person reads (which characters do not show), the one shell quoting function, where
obc's templates and schema are, where a run file's project is, the cache on disk and the two
worker processes. Takes and returns plain values; imports nothing of obc."""
