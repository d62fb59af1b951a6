"""The `obc` command line: parses arguments, runs a command of the packages below, chooses what
is printed (reporters.py) and the exit code. The top floor: nothing of obc imports it."""
