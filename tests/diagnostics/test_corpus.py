"""The corpus of bad run files: each one rule broken, each reported once, at the exact place.

Every case is run through `obc validate` and `obc compile`: both must report exactly the one
diagnostic the case names (line, column, field, and the key words of the message, hint
included), exit 1, and leave the output folder uncreated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.diagnostics.harness import run_obc

# A valid run file of four lines; cases append to it from line 5.
BASE = "version: 1\nid: r\nruntime: {kind: docker}\nsteps: [{name: a, run: [x]}]\n"
STEPS = "steps: [{name: a, run: [x]}]\n"


def with_runtime(runtime: str) -> str:
    """A run file whose runtime mapping (block style, from line 3) is `runtime`."""
    return f"version: 1\nid: r\nruntime:\n{runtime}{STEPS}"


def with_steps(steps: str) -> str:
    """A run file whose steps list (block style, from line 4) is `steps`."""
    return f"version: 1\nid: r\nruntime: {{kind: docker}}\nsteps:\n{steps}"


@dataclass(frozen=True)
class Case:
    text: str | bytes
    line: int
    column: int
    field: str
    words: tuple[str, ...]
    attachments: dict[str, str | bytes] = field(default_factory=dict)


def case(name: str, text: str | bytes, line: int, column: int, field_: str,  # noqa: PLR0913
         *words: str, attachments: dict[str, str | bytes] | None = None):
    """One row of the corpus: the run file, where its problem is, and what the message says."""
    return pytest.param(Case(text, line, column, field_, words, attachments or {}), id=name)


def alias_bomb(levels: int = 9) -> str:
    lines = [BASE.rstrip("\n"), "x-a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x-a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def alias_chain(length: int) -> str:
    """Each anchor nests the one before it one level deeper: shallow text, deep data."""
    lines = [BASE.rstrip("\n"), "x-c0: &c0 [end]"]
    lines += [f"x-c{i}: &c{i} [*c{i - 1}]" for i in range(1, length + 1)]
    return "\n".join(lines) + "\n"


BIG_ARG = "a" * 131_072

YAML_TRAPS = [
    case("duplicate-key", BASE + "id: s\n", 5, 1, "id",
         "duplicate key 'id'", "also at line 2, column 1", "keep only the last one"),
    case("duplicate-key-nested", with_runtime("  kind: docker\n  kind: podman\n"), 5, 3,
         "runtime.kind", "duplicate key 'kind'", "line 4, column 3"),
    case("duplicate-key-flow", BASE + "env: {A: '1', A: '2'}\n", 5, 15, "env.A",
         "duplicate key 'A'", "line 5, column 7"),
    case("float-in-run", with_steps("  - name: a\n    run: [python, 3.10]\n"), 6, 19,
         "steps[0].run[1]", "expected a string", "the number 3.1", "YAML reads 3.10",
         'quote it: "3.10"'),
    case("float-in-env", BASE + "env:\n  LR: 1e-5\n", 6, 7, "env.LR",
         "expected a string, an integer or a mapping", 'quote it: LR: "1e-5"'),
    case("bool-in-env", BASE + "env:\n  FLAG: true\n", 6, 9, "env.FLAG",
         "got the boolean true", 'quote it: FLAG: "true"'),
    case("empty-env-value", BASE + "env:\n  A:\n  B: b\n", 6, 5, "env.A",
         "got null (an empty value)", 'for an empty string write A: ""'),
    case("tilde-null-env-value", BASE + "env:\n  A: ~\n", 6, 6, "env.A",
         "got null", 'YAML reads ~ as null', 'quote it: A: "~"'),
    case("bool-in-run", with_steps("  - name: a\n    run: [x, false]\n"), 6, 14,
         "steps[0].run[1]", "got the boolean false", 'quote it: "false"'),
    case("null-in-run", with_steps("  - name: a\n    run: [x, null]\n"), 6, 14,
         "steps[0].run[1]", "got null", 'quote it: "null"'),
    case("number-as-description", BASE + "description: 3.10\n", 5, 14, "description",
         "expected a string", 'quote it: description: "3.10"'),
    case("number-as-id", "version: 1\nid: 123\nruntime: {kind: docker}\n" + STEPS, 2, 5, "id",
         "expected a string, got the number 123", 'quote it: id: "123"'),
    case("hex-env-value", BASE + "env:\n  MASK: 0x1F\n", 6, 9, "env.MASK",
         "YAML reads 0x1F as the number 31", 'MASK: "0x1F"'),
    case("leading-zero-env-value", BASE + "env:\n  CODE: 007\n", 6, 9, "env.CODE",
         "YAML reads 007 as the number 7", 'CODE: "007"'),
    case("underscore-env-value", BASE + "env:\n  N: 1_000\n", 6, 6, "env.N",
         "YAML reads 1_000 as the number 1000"),
    case("tab-indentation", BASE + "env:\n\tA: b\n", 6, 1, "",
         "a tab is used for indentation", "spaces only"),
    case("tab-separator", BASE + "env:\n  A:\tb\n", 6, 5, "",
         "a tab separates values", "replace the tab with a space"),
    case("byte-order-mark", b"\xef\xbb\xbf" + BASE.encode(), 1, 1, "",
         "byte order mark", "without BOM"),
    case("two-documents", BASE + "---\nversion: 1\n", 5, 1, "",
         "more than one YAML document", "remove the second '---'"),
    case("python-object-tag", BASE + "description: !!python/object:os.system x\n", 5, 14, "",
         "YAML tag '!!python/object:os.system' is not allowed"),
    case("binary-tag", BASE + "description: !!binary aGVsbG8=\n", 5, 14, "",
         "YAML tag '!!binary' is not allowed", "plain YAML values only"),
    case("custom-tag", BASE + "env:\n  A: !Ref b\n", 6, 6, "", "YAML tag '!Ref'"),
    case("str-tag", BASE + "env:\n  A: !!str 1\n", 6, 6, "", "YAML tag '!!str'"),
    case("set-tag", BASE + "x-s: !!set {a, b}\n", 5, 6, "", "YAML tag '!!set'"),
    case("merge-key", BASE + "x-base: &base {kind: docker}\nx-run:\n  <<: *base\n", 7, 3,
         "x-run", "merge keys ('<<') are not supported", "write the keys out"),
    case("alias-bomb", alias_bomb(), 9, 7, "",
         "aliases expand this to more than 10,000 values", "alias bomb"),
    case("alias-contains-itself", BASE + "x-a: &a [*a]\n", 5, 6, "",
         "an alias refers to the value that contains it"),
    case("alias-nests-too-deep", alias_chain(40), 36, 8, "",
         "nesting is deeper than 32 levels once aliases are expanded"),
    case("undefined-alias", BASE + "description: *nowhere\n", 5, 14, "",
         "found undefined alias 'nowhere'"),
    case("file-over-1-mib", BASE + "x-pad: " + "a" * (1 << 20) + "\n", 1, 1, "",
         "larger than 1 MiB"),
    case("too-many-values", BASE + "x-many: [" + ",".join("1" * 10_001) + "]\n", 5, 19_972,
         "", "more than 10,000 values"),
    case("nesting-too-deep", BASE + "x-deep: " + "[" * 33 + "]" * 33 + "\n", 5, 40, "",
         "nesting is deeper than 32 levels"),
    case("not-utf-8", BASE.encode() + b"description: caf\xe9\n", 5, 17, "",
         "not valid UTF-8 (byte 0xe9)"),
    case("nul-byte", BASE.encode() + b"description: a\x00b\n", 5, 15, "",
         "NUL byte"),
    case("nul-escape", BASE + 'description: "a\\0b"\n', 5, 14, "description",
         "string holds a NUL character"),
    case("nul-escape-in-key", BASE + 'files: {"a\\0": b}\n', 5, 9, 'files["a\\u0000"]',
         "string holds a NUL character"),
    case("lone-surrogate", BASE + 'description: "\\ud800"\n', 5, 14, "description",
         "lone surrogate"),
    case("control-character", BASE + "description: a\x1bb\n", 5, 15, "",
         "control character U+001B"),
    case("carriage-return-escape", with_steps('  - name: a\n    run: [x, "a\\rb"]\n'), 6, 14,
         "steps[0].run[1]", "control character U+000D (carriage return)",
         "show the script differently"),
    case("escape-escape", BASE + 'env:\n  A: "\\e[2J"\n', 6, 6, "env.A",
         "control character U+001B (escape)"),
    case("c1-control-escape", BASE + 'description: "\\x9b31m"\n', 5, 14, "description",
         "control character U+009B"),
    case("yaml-1.1-directive", "%YAML 1.1\n---\n" + BASE, 2, 1, "",
         "obc reads YAML 1.2, not YAML 1.1", "remove the %YAML directive"),
    case("empty-file", "", 1, 1, "", "file is empty"),
    case("comments-only", "# nothing yet\n", 1, 1, "", "file is empty"),
    case("root-is-a-list", "- version: 1\n", 1, 1, "", "expected a mapping, got a list",
         "a run file is a mapping of keys such as version"),
    case("root-is-a-string", "hello\n", 1, 1, "", "got the string 'hello'"),
    case("integer-key", BASE + "env:\n  1: a\n", 6, 3, "env",
         "a mapping key must be a string; YAML reads 1 as int", 'quote it: "1"'),
    case("boolean-key", BASE + "env:\n  true: a\n", 6, 3, "env", "YAML reads true as bool"),
    case("list-key", BASE + "env:\n  ? [a]\n  : b\n", 6, 5, "env",
         "a mapping key must be a string, not a list"),
    case("unclosed-quote", BASE + 'description: "never closed\n', 5, 14, "",
         "this quoted string is never closed", "add the closing quote"),
    case("unclosed-bracket", BASE + "x-list: {a: 1\n", 5, 9, "",
         "never closed", "add the closing ']' or '}'"),
    case("bad-indentation", BASE + "env:\n    A: a\n  B: b\n", 7, 3, "",
         "indentation does not match", "align it"),
    case("colon-in-plain-value", BASE + "description: see: here\n", 5, 17, "",
         "a ': ' here starts a mapping", "quote a value that holds ': '"),
    case("at-sign-start", BASE + "description: @team\n", 5, 14, "",
         "a plain value cannot start with this character", "quote the value"),
    case("huge-integer", BASE + "x-n: " + "9" * 5000 + "\n", 5, 6, "x-n",
         "this number is too large to read"),
]

SCHEMA = [
    case("missing-version", "id: r\nruntime: {kind: docker}\n" + STEPS, 1, 1, "version",
         "required key 'version' is missing"),
    case("missing-id", "version: 1\nruntime: {kind: docker}\n" + STEPS, 1, 1, "id",
         "required key 'id' is missing"),
    case("missing-runtime", "version: 1\nid: r\n" + STEPS, 1, 1, "runtime",
         "required key 'runtime' is missing"),
    case("missing-runtime-kind", with_runtime("  gpus: all\n"), 4, 3, "runtime.kind",
         "required key 'kind' is missing"),
    case("missing-step-run", with_steps("  - name: a\n"), 5, 5, "steps[0].run",
         "required key 'run' is missing"),
    case("version-2", "version: 2\nid: r\nruntime: {kind: docker}\n" + STEPS, 1, 10, "version",
         "unsupported version 2", "this obc reads version 1"),
    case("version-quoted", "version: '1'\nid: r\nruntime: {kind: docker}\n" + STEPS, 1, 10,
         "version", "the version is the number 1, not the string '1'"),
    case("unknown-key-suggested", BASE + "envv: {}\n", 5, 1, "envv",
         "unknown key 'envv'", "did you mean 'env'?"),
    case("unknown-nested-key", with_runtime("  kind: docker\n  imagee: x\n"), 5, 3,
         "runtime.imagee", "unknown key 'imagee' in runtime", "did you mean 'image'?"),
    case("unknown-key-unlike-any", BASE + "zzz: 1\n", 5, 1, "zzz", "unknown key 'zzz'"),
    case("matrix-not-yet", BASE + "matrix: {}\n", 5, 1, "matrix", "not supported yet"),
    case("extends-not-yet", BASE + "extends: base.yaml\n", 5, 1, "extends", "not supported yet"),
    case("apptainer-not-yet", with_runtime("  kind: apptainer\n"), 4, 9, "runtime.kind",
         "'apptainer' is not supported yet"),
    case("kind-misspelt", with_runtime("  kind: dokcer\n"), 4, 9, "runtime.kind",
         "'dokcer' is not one of docker, podman, native", "did you mean 'docker'?"),
    case("gpus-misspelt", with_runtime("  kind: docker\n  gpus: alll\n"), 5, 9, "runtime.gpus",
         "'alll' is not one of all, none", "did you mean 'all'?"),
    case("gpus-negative", with_runtime("  kind: docker\n  gpus: [0, -1]\n"), 5, 13,
         "runtime.gpus[1]", "must be at least 0, got -1"),
    case("gpus-empty-list", with_runtime("  kind: docker\n  gpus: []\n"), 5, 9, "runtime.gpus",
         "must not be empty"),
    case("gpus-bad-id", with_runtime("  kind: docker\n  gpus: [a b]\n"), 5, 10,
         "runtime.gpus[0]", "'a b'", "a device id is letters, digits"),
    case("gpus-number", with_runtime("  kind: docker\n  gpus: 3\n"), 5, 9, "runtime.gpus",
         "expected a string or a list, got the number 3"),
    case("gpus-twice", with_runtime("  kind: docker\n  gpus: [0, 0]\n"), 5, 9, "runtime.gpus",
         "lists the same item twice"),
    case("shm-size", with_runtime("  kind: docker\n  shm_size: 16gb\n"), 5, 13,
         "runtime.shm_size", "'16gb'", "write a size such as 16g"),
    case("steps-empty", "version: 1\nid: r\nruntime: {kind: docker}\nsteps: []\n", 4, 8,
         "steps", "must not be empty"),
    case("run-empty", with_steps("  - name: a\n    run: []\n"), 6, 10, "steps[0].run",
         "must not be empty"),
    case("step-name-uppercase", with_steps("  - name: Train\n    run: [x]\n"), 5, 11,
         "steps[0].name", "'Train'", "lowercase letters"),
    case("step-name-too-long", with_steps(f"  - name: {'a' * 33}\n    run: [x]\n"), 5, 11,
         "steps[0].name", "use 1 to 32"),
    case("step-name-newline", with_steps('  - name: "a\\n"\n    run: [x]\n'), 5, 11,
         "steps[0].name", "'a\\n'"),
    case("id-trailing-newline", 'version: 1\nid: "run1\\n"\nruntime: {kind: docker}\n' + STEPS,
         2, 5, "id", "'run1\\n'", "use 1 to 63 lowercase letters"),
    case("id-arabic-indic-digit", "version: 1\nid: run\u0661\nruntime: {kind: docker}\n" + STEPS,
         2, 5, "id", "'run\u0661'"),
    case("id-uppercase", "version: 1\nid: Run\nruntime: {kind: docker}\n" + STEPS, 2, 5, "id",
         "'Run'"),
    case("id-too-long", f"version: 1\nid: {'r' * 64}\nruntime: {{kind: docker}}\n" + STEPS,
         2, 5, "id", "use 1 to 63"),
    case("id-leading-dot", "version: 1\nid: .r\nruntime: {kind: docker}\n" + STEPS, 2, 5, "id",
         "starting with a letter or digit"),
    case("id-fullwidth-letter", "version: 1\nid: \uff52un\nruntime: {kind: docker}\n" + STEPS,
         2, 5, "id", "'\uff52un'"),
    case("env-name-dash", BASE + "env:\n  A-B: x\n", 6, 3, "env.A-B",
         "'A-B' is not a valid name", "letters, digits and '_'"),
    case("env-name-digit-first", BASE + "env:\n  1X: x\n", 6, 3, "env.1X",
         "'1X' is not a valid name"),
    case("env-name-newline", BASE + 'env:\n  "A\\n": x\n', 6, 3, 'env["A\\n"]',
         "'A\\n' is not a valid name"),
    case("env-name-arabic-indic-digit", BASE + "env:\n  A\u0661: x\n", 6, 3, 'env["A\\u0661"]',
         "is not a valid name"),
    case("env-name-non-ascii-letter", BASE + "env:\n  \u00c9T\u00c9: x\n", 6, 3,
         'env["\\u00c9T\\u00c9"]', "is not a valid name"),
    case("secret-name-invalid", BASE + "secrets: [HF-TOKEN]\n", 5, 11, "secrets[0]",
         "'HF-TOKEN'", "an environment variable name"),
    case("secret-unknown-key", BASE + "secrets: [{name: A, requird: false}]\n", 5, 21,
         "secrets[0].requird", "did you mean 'required'?"),
    case("secret-number", BASE + "secrets: [3]\n", 5, 11, "secrets[0]",
         "expected a string or a mapping, got the number 3"),
    case("secret-required-string", BASE + "secrets: [{name: A, required: 'no'}]\n", 5, 31,
         "secrets[0].required", "expected true or false, got the string 'no'"),
    case("neither-trainer-nor-steps", "version: 1\nid: r\nruntime: {kind: docker}\n", 1, 1, "",
         "missing 'trainer' or 'steps'", "add trainer:"),
    case("axolotl-config-missing",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl: {}\n", 5, 12,
         "trainer.axolotl.config", "required key 'config' is missing"),
    case("axolotl-config-number",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl: {config: 3}\n",
         5, 21, "trainer.axolotl.config", "expected a string or a mapping, got the number 3"),
    case("axolotl-config-empty",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl: {config: ''}\n",
         5, 21, "trainer.axolotl.config", "must not be empty"),
    case("axolotl-misspelt",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotll: {config: {}}\n",
         5, 3, "trainer.axolotll", "did you mean 'axolotl'?"),
    case("preprocess-not-boolean",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n"
         "  axolotl: {config: {}, preprocess: yes}\n", 5, 37, "trainer.axolotl.preprocess",
         "expected true or false, got the string 'yes'", "YAML 1.2 reads yes as text"),
    case("files-source-number", BASE + "files:\n  a.py: 1\n", 6, 9, 'files["a.py"]',
         "expected a string, got the number 1"),
    case("files-source-empty", BASE + "files:\n  a.py: ''\n", 6, 9, 'files["a.py"]',
         "must not be empty"),
    case("paths-unknown-key", BASE + "paths:\n  rundir: /x\n", 6, 3, "paths.rundir",
         "did you mean 'run_dir'?"),
    case("path-tilde-user", BASE + "paths:\n  run_dir: ~user/runs\n", 6, 12, "paths.run_dir",
         "'~' only alone or as '~/'"),
    case("path-newline", BASE + 'paths:\n  cache_dir: "/a\\nb"\n', 6, 14, "paths.cache_dir",
         "a path has no newline"),
    case("path-empty", BASE + "paths:\n  run_dir: ''\n", 6, 12, "paths.run_dir",
         "must not be empty"),
]

RULES = [
    *[case(f"reserved-{name}", BASE + f"env:\n  {name}: x\n", 6, 3, f"env.{name}",
           f"'{name}' cannot be set by a run file", reason)
      for name, reason in [("IFS", "splits words"), ("ENV", "source the file"),
                           ("BASH_ENV", "sources the file"), ("CDPATH", "where 'cd' goes"),
                           ("PS4", "can run commands"), ("SHELLOPTS", "xtrace"),
                           ("BASHOPTS", "bash options")]],
    case("reserved-obc-prefix", BASE + "env:\n  OBC_JOB: x\n", 6, 3, "env.OBC_JOB",
         "names starting with OBC_", "belong to the job script"),
    case("reserved-secret-name", BASE + "secrets: [IFS]\n", 5, 11, "secrets[0]",
         "'IFS' cannot be set by a run file"),
    case("hf-home-in-container", BASE + "env:\n  HF_HOME: /x\n", 6, 3, "env.HF_HOME",
         "the job sets it to the cache dir", "set paths.cache_dir instead"),
    case("hf-home-native-with-cache-dir",
         "version: 1\nid: r\nruntime: {kind: native}\n" + STEPS +
         "paths: {cache_dir: /c}\nenv:\n  HF_HOME: /x\n", 7, 3, "env.HF_HOME",
         "set paths.cache_dir instead"),
    case("cuda-visible-devices-native",
         "version: 1\nid: r\nruntime: {kind: native, gpus: [0]}\n" + STEPS +
         "env:\n  CUDA_VISIBLE_DEVICES: '1'\n", 6, 3, "env.CUDA_VISIBLE_DEVICES",
         "change runtime.gpus instead"),
    case("name-in-env-and-secrets", BASE + "env:\n  NAME: x\nsecrets: [NAME]\n", 7, 11,
         "secrets[0]", "'NAME' is already given in env (line 6, column 3)"),
    case("secret-twice", BASE + "secrets: [A, {name: A}]\n", 5, 21, "secrets[1].name",
         "'A' is already given in secrets (line 5, column 11)"),
    case("step-name-twice", with_steps("  - {name: a, run: [x]}\n  - {name: a, run: [y]}\n"),
         6, 12, "steps[1].name", "step name 'a' is already used (line 5, column 12)"),
    case("program-with-equals", with_steps("  - name: a\n    run: [A=b, x]\n"), 6, 11,
         "steps[0].run[0]", "a program name cannot contain '='", "put variables in env:"),
    case("program-with-newline", with_steps('  - name: a\n    run: ["x\\ny"]\n'), 6, 11,
         "steps[0].run[0]", "a program name cannot contain a newline"),
    case("program-empty", with_steps("  - name: a\n    run: ['', x]\n"), 6, 11,
         "steps[0].run[0]", "the program name is empty"),
    case("argument-too-long", with_steps(f"  - name: a\n    run: [x, {BIG_ARG}]\n"), 6, 14,
         "steps[0].run[1]", "is 131,072 bytes", "longer than 131,071 bytes"),
    case("env-string-too-long", BASE + f"env:\n  A: {'a' * 131_070}\n", 6, 6, "env.A",
         "is 131,072 bytes"),
    case("extra-arg-too-long", with_runtime(f"  kind: docker\n  extra_args: [-{BIG_ARG}]\n"),
         5, 16, "runtime.extra_args[0]", "is 131,073 bytes"),
    case("files-dotdot", BASE + "files:\n  ../x.py: x.py\n", 6, 3, 'files["../x.py"]',
         "'../x.py' must stay inside the run dir"),
    case("files-dotdot-inside", BASE + "files:\n  a/../../x.py: x.py\n", 6, 3,
         'files["a/../../x.py"]', "must stay inside the run dir"),
    case("files-absolute", BASE + "files:\n  /etc/x: x.py\n", 6, 3, 'files["/etc/x"]',
         "must be relative to the run dir"),
    case("files-empty-part", BASE + "files:\n  a//b: x.py\n", 6, 3, 'files["a//b"]',
         "no empty or '.' parts"),
    case("files-trailing-slash", BASE + "files:\n  a/: x.py\n", 6, 3, 'files["a/"]',
         "no trailing '/'"),
    case("files-trainer-config", "version: 1\nid: r\nruntime: {kind: docker}\n"
         "trainer: {axolotl: {config: {}}}\nfiles:\n  axolotl.yaml: x.yaml\n", 6, 3,
         'files["axolotl.yaml"]', "is where the trainer's config goes"),
    case("files-newline", BASE + 'files:\n  "a\\nb": x.py\n', 6, 3, 'files["a\\nb"]',
         "must not contain a newline"),
    case("mount-source-colon", with_runtime("  kind: docker\n  mounts:\n"
                                            "    - {source: /a:b, target: /b}\n"), 6, 16,
         "runtime.mounts[0].source", "cannot hold ':' or ','", "the engine splits on them"),
    case("mount-source-comma", with_runtime("  kind: docker\n  mounts:\n"
                                            "    - {source: 'a,b', target: /b}\n"), 6, 16,
         "runtime.mounts[0].source", "cannot hold ':' or ','"),
    case("mount-target-colon", with_runtime("  kind: podman\n  mounts:\n"
                                            "    - {source: /a, target: '/b:ro'}\n"), 6, 28,
         "runtime.mounts[0].target", "without ':', ','"),
    case("mount-target-relative", with_runtime("  kind: docker\n  mounts:\n"
                                               "    - {source: /a, target: b}\n"), 6, 28,
         "runtime.mounts[0].target", "must be an absolute path"),
    case("mount-source-relative", with_runtime("  kind: docker\n  mounts:\n"
                                               "    - {source: data, target: /b}\n"), 6, 16,
         "runtime.mounts[0].source", "absolute, starts with ~/", "named volume"),
    case("mount-source-tilde-user", with_runtime("  kind: docker\n  mounts:\n"
                                                 "    - {source: ~user/d, target: /b}\n"), 6, 16,
         "runtime.mounts[0].source", "absolute, starts with ~/"),
    case("mount-source-newline", with_runtime("  kind: docker\n  mounts:\n"
                                              "    - {source: \"/a\\nb\", target: /b}\n"), 6, 16,
         "runtime.mounts[0].source", "or a newline"),
    case("mount-target-newline", with_runtime("  kind: docker\n  mounts:\n"
                                              "    - {source: /a, target: \"/b\\nc\"}\n"), 6, 28,
         "runtime.mounts[0].target", "or a newline"),
    case("run-dir-colon-in-container", BASE + "paths:\n  run_dir: /runs/a:b\n", 6, 12,
         "paths.run_dir", "a docker job mounts this folder", "splits a mount on ':' and ','"),
    case("cache-dir-comma-in-container", BASE + "paths:\n  cache_dir: /c,d\n", 6, 14,
         "paths.cache_dir", "splits a mount on ':' and ','"),
    case("mount-target-taken", with_runtime("  kind: docker\n  mounts:\n"
                                            "    - {source: /a, target: /workspace/run}\n"),
         6, 28, "runtime.mounts[0].target", "is taken by the job's own mounts"),
    case("mount-target-missing", with_runtime("  kind: docker\n  mounts:\n"
                                              "    - {source: /a}\n"), 6, 7,
         "runtime.mounts[0].target", "required key 'target' is missing"),
    case("image-uppercase", with_runtime("  kind: docker\n  image: Team/Image\n"), 5, 10,
         "runtime.image", "'Team/Image'", "is not a valid image reference"),
    case("image-option", with_runtime("  kind: docker\n  image: --privileged\n"), 5, 10,
         "runtime.image", "is not a valid image reference"),
    case("image-space", with_runtime("  kind: docker\n  image: 'a b'\n"), 5, 10,
         "runtime.image", "is not a valid image reference"),
    case("image-homoglyph", with_runtime("  kind: docker\n  image: \u0430xolotl\n"), 5, 10,
         "runtime.image", "is not a valid image reference"),
    case("image-short-digest", with_runtime("  kind: docker\n  image: a@sha256:abc\n"), 5, 10,
         "runtime.image", "is not a valid image reference"),
    case("venv-on-docker", with_runtime("  kind: docker\n  venv: /v\n"), 5, 3, "runtime.venv",
         "only applies to runtime.kind native, not to docker"),
    case("env-file-on-podman", with_runtime("  kind: podman\n  env_file: /e\n"), 5, 3,
         "runtime.env_file", "only applies to runtime.kind native, not to podman"),
    case("image-on-native", with_runtime("  kind: native\n  image: a\n"), 5, 3, "runtime.image",
         "only applies to docker and podman, not to native"),
    case("mounts-on-native", with_runtime("  kind: native\n  mounts: []\n"), 5, 3,
         "runtime.mounts", "only applies to docker and podman"),
    case("shm-size-on-native", with_runtime("  kind: native\n  shm_size: 1g\n"), 5, 3,
         "runtime.shm_size", "only applies to docker and podman"),
    case("extra-args-on-native", with_runtime("  kind: native\n  extra_args: [-x]\n"), 5, 3,
         "runtime.extra_args", "only applies to docker and podman"),
    case("extra-arg-not-an-option", with_runtime("  kind: docker\n  extra_args: [privileged]\n"),
         5, 16, "runtime.extra_args[0]", "an engine option starts with '-'"),
    case("config-file-missing",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl: {config: c.yaml}\n",
         5, 21, "trainer.axolotl.config", "file 'c.yaml'", "No such file"),
    case("config-file-not-a-mapping",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl: {config: c.yaml}\n",
         5, 21, "trainer.axolotl.config", "does not hold a YAML mapping",
         attachments={"c.yaml": "- a\n"}),
    case("config-file-bad-yaml",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl: {config: c.yaml}\n",
         5, 21, "trainer.axolotl.config", "is not valid YAML",
         attachments={"c.yaml": "a: [\n"}),
    case("files-source-missing", BASE + "files:\n  a.py: src/a.py\n", 6, 9, 'files["a.py"]',
         "file 'src/a.py'", "No such file"),
    case("files-source-binary", BASE + "files:\n  a.bin: a.bin\n", 6, 10, 'files["a.bin"]',
         "contains a NUL byte", attachments={"a.bin": b"\x7fELF\x00"}),
]


def write_case(folder: Path, bad: Case) -> Path:
    for name, content in bad.attachments.items():
        path = folder / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    run_file = folder / "run.yaml"
    run_file.write_bytes(bad.text if isinstance(bad.text, bytes) else bad.text.encode())
    return run_file


@pytest.mark.parametrize("bad", [*YAML_TRAPS, *SCHEMA, *RULES])
@pytest.mark.parametrize("command", ["validate", "compile"])
def test_each_bad_file_is_reported_once_at_the_exact_place(bad, command, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_case(tmp_path, bad)
    out = ["-o", "out"] if command == "compile" else []
    outcome = run_obc(command, "--format", "json", "run.yaml", *out)

    assert outcome.code == 1, outcome
    (found,) = outcome.diagnostics()
    assert (found["file"], found["line"], found["column"], found["field"]) == (
        "run.yaml", bad.line, bad.column, bad.field), found
    said = found["message"] + " " + (found["hint"] or "")
    for word in bad.words:
        assert word in said, found
    assert not (tmp_path / "out").exists()


def test_the_corpus_covers_at_least_eighty_bad_files():
    assert len(YAML_TRAPS) + len(SCHEMA) + len(RULES) >= 80
