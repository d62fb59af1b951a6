"""The #SBATCH block of a Slurm job: sbatch reads these comment lines, the shell skips them.

sbatch takes each value as written (no quotes, no $VARIABLES, no ~): the schema lets through
only values that mean the same to sbatch as in the run file, so nothing here quotes.
"""

from __future__ import annotations

from .model import Slurm
from .shell import ShellText


def sbatch_lines(slurm: Slurm | tuple[str, ...]) -> ShellText:
    """Return the `#SBATCH --option=value` lines of `slurm` (or of these directives, which
    come from runs' own), one per directive."""
    directives = slurm.directives if isinstance(slurm, Slurm) else slurm
    return ShellText("\n".join(f"#SBATCH {directive}" for directive in directives))
