"""Stages 1 to 6 in order: run files are built (read, sweep, validate, normalise, policy),
rendered, checked, and written under OUT. The only package that writes under OUT (write.py:
each file written whole and renamed into place, owned by its header); the rest only compute.
Imports every stage below it; never plan, lock or cli."""
