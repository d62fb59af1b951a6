"""Stage 5, check: scripts into shellcheck's findings, as diagnostics, each distinct text checked
once and its findings kept in the cache. Imports only core."""
