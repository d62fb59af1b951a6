"""`obc plan`: what a compile would do to OUT, said by what the jobs mean: a diff of meanings
as data (diff.py), what changed inside embedded files, the bill of materials a reviewer
approves, and the report of it all as text, JSON or markdown. Reads OUT, never writes it.
Imports pipeline and everything below it."""
