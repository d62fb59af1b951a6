"""`obc report`: the status table and the loss curves of jobs, as one static HTML page.
Enters: the rows of `obc status` (compiler/status). Leaves: the page's text. Reads nothing
more than status does; draws with matplotlib (the extra `overbrainer[report]`); writes
nothing (the command line writes the file). Imports status and core; never cli."""
