"""The corpus of bad sweeps: run files with a matrix, each with one problem, reported once
at its exact place (docs/sweeps.md) by `obc validate` and `obc compile` alike.

A problem of one run is located where the run file says it (most often the axis value that
made it), and names the runs that have it; a problem every run has is the file's own.
"""

from __future__ import annotations

from tests.compile.diagnostics.corpus import BASE, case, reported_once_test

# BASE is four lines; the matrix starts on line 5, its first axis on line 7.
AXES = BASE + "matrix:\n  axes:\n"
TRAINER = ("version: 1\nid: r\nruntime: {kind: docker, mounts: [{source: /srv, target: /data}]}\n"
           "trainer: {axolotl: {config: {base_model: m, output_dir: /data/out}}}\n")
FILE_CONFIG = ("version: 1\nid: r\nruntime: {kind: docker}\n"
               "trainer: {axolotl: {config: cfg.yaml}}\n")

SWEEPS = [
    case("patch-bad-value", AXES + "    k: {a: {}, b: {runtime: {kind: dokcer}}}\n", 7, 36,
         "runtime.kind", "in run r-b:", "'dokcer' is not one of", "did you mean 'docker'?"),
    case("set-value-a-float", AXES + '    lr: {set: env.LR, values: {x: 1.5, y: "2"}}\n', 7, 35,
         "env.LR", "in run r-x:", "got the number 1.5"),
    case("every-run-same-problem", AXES.replace("kind: docker", "kind: dokcer")
         + "    n: {set: env.N, values: [a, b]}\n", 3, 17, "runtime.kind", "'dokcer'"),
    case("exclude-unknown-axis", AXES + "    model: {a: {}, b: {}}\n"
         "  exclude: [{modle: a}]\n", 8, 14, "matrix.exclude[0].modle",
         "no axis is named 'modle'", "did you mean 'model'?"),
    case("exclude-unknown-label", AXES + "    model: {qwen: {}, llama: {}}\n"
         "  exclude: [{model: [qwen, lama]}]\n", 8, 28, "matrix.exclude[0].model[1]",
         "axis 'model' has no label 'lama'", "did you mean 'llama'?", "qwen, llama"),
    case("exclude-a-float", AXES + "    s: {set: env.S, values: [1, 2]}\n"
         "  exclude: [{s: 2.5}]\n", 8, 17, "matrix.exclude[0].s",
         "expected a string or an integer, got the number 2.5"),
    case("template-unknown-placeholder", AXES + "    model: {x: {}}\n  id: '{id}-{modle}'\n",
         8, 7, "matrix.id", "{modle} names no axis", "did you mean 'model'?",
         "the placeholders: {id}, {model}"),
    case("template-makes-one-id-twice", AXES + "    a: {x: {}}\n    b: {u: {}, v: {}}\n"
         "  id: '{id}-{a}'\n", 9, 7, "matrix.id", "runs a=x b=u and a=x b=v both get the "
         "id 'r-x'", "tell them apart"),
    case("labels-make-one-id-twice", AXES + "    a: {x-y: {}, x: {}}\n    b: {z: {}, y-z: {}}\n",
         2, 5, "id", "runs a=x-y b=z and a=x b=y-z both get the id 'r-x-y-z'"),
    case("template-the-sweeps-id", AXES + "    a: {x: {}}\n  id: '{id}'\n", 8, 7, "matrix.id",
         "gets the sweep's own id 'r'", "holds sweep.sh"),
    case("ids-too-long", AXES + "    a: {" + "x" * 62 + ": {}, y: {}}\n", 2, 5, "id",
         "run a=" + "x" * 62 + ": 'r-" + "x" * 62 + "' (64 characters)", "shorter labels"),
    case("template-not-an-id", AXES + "    a: {x: {}}\n  id: '{id}_LR{a}'\n", 8, 7, "matrix.id",
         "run a=x: 'r_LRx' (5 characters)", "lowercase"),
    case("named-run-id-too-long", AXES + "    a: {x: {}}\n  runs: {" + "n" * 62 + ": {}}\n", 8,
         10, "matrix.runs." + "n" * 62, "64 characters"),
    case("too-many-runs", AXES + "    a: {set: env.A, values: [1, 2, 3]}\n"
         "    b: {set: env.B, values: [1, 2, 3]}\n  max_runs: 8\n", 9, 13, "matrix.max_runs",
         "9 runs, more than max_runs (8)"),
    case("too-many-combinations", AXES + "".join(
        f"    {axis}: {{set: env.{axis.upper()}, values: [{', '.join(map(str, range(11)))}]}}\n"
        for axis in "abcde"), 7, 5, "matrix.axes", "161,051 combinations",
         "at most 100,000"),
    case("max-runs-over-the-cap", AXES + "    a: {x: {}}\n  max_runs: 10001\n", 8, 13,
         "matrix.max_runs", "10000"),
    case("all-excluded", AXES + "    a: {x: {}}\n  exclude: [{a: x}]\n", 8, 12, "matrix.exclude",
         "every combination is excluded"),
    case("patch-sets-the-id", AXES + "    a: {x: {id: other}}\n", 7, 13, "matrix.axes.a.x.id",
         "a patch cannot change id"),
    case("named-run-sets-a-matrix", AXES + "    a: {x: {}}\n  runs: {more: {matrix: {}}}\n",
         8, 17, "matrix.runs.more.matrix", "a patch cannot change matrix"),
    case("set-the-id", AXES + "    a: {set: id, values: [x]}\n", 7, 14, "matrix.axes.a.set",
         "set cannot change id"),
    case("set-through-a-list", AXES + "    a: {set: steps.name, values: [x, y]}\n", 7, 14,
         "matrix.axes.a.set", "steps is a list, not a mapping", "set the whole list"),
    case("label-not-an-id", AXES + "    a: {Qwen: {}}\n", 7, 9, "matrix.axes.a.Qwen",
         "'Qwen' is not a valid name", "lowercase"),
    case("axis-name-reserved", AXES + "    index: {x: {}}\n", 7, 5, "matrix.axes.index",
         "an axis cannot be named 'index'"),
    case("set-not-a-path", AXES + "    a: {set: 'env..A', values: [x]}\n", 7, 14,
         "matrix.axes.a.set", "a dotted path"),
    case("set-without-values", AXES + "    a: {set: env.A}\n", 7, 8, "matrix.axes.a.values",
         "required key 'values' is missing"),
    case("list-label-twice", AXES + "    a: {set: env.A, values: [1, '1']}\n", 7, 33,
         "matrix.axes.a.values[1]", "label '1' is already a label of axis 'a'"),
    case("list-value-a-float", AXES + "    a: {set: env.A, values: [1.5]}\n", 7, 30,
         "matrix.axes.a.values[0]", "got the number 1.5"),
    case("patch-not-a-mapping", AXES + "    a: {x: 3}\n", 7, 12, "matrix.axes.a.x",
         "expected a mapping, got the number 3"),
    case("matrix-empty", BASE + "matrix: {}\n", 5, 9, "matrix", "a matrix needs axes"),
    case("matrix-unknown-key", BASE + "matrix: {axis: {}}\n", 5, 10, "matrix.axis",
         "unknown key 'axis' in matrix", "did you mean 'axes'?"),
    case("sweep-without-id", "version: 1\nruntime: {kind: docker}\nsteps: [{name: a, run: [x]}]\n"
         "matrix: {axes: {a: {x: {}}}}\n", 1, 1, "id", "required key 'id' is missing"),
    case("shared-run-dir", AXES.replace("steps:", "paths: {run_dir: /srv/run}\nsteps:")
         + "    a: {x: {}, y: {}}\n", 4, 18, "paths.run_dir", "runs r-x, r-y share the run dir "
         "'/srv/run'", "default"),
    # One folder written two ways (issue 18, F11): compared after normalisation.
    *[case(f"shared-run-dir-{name}", AXES + "    d: {set: paths.run_dir, values: "
           f"{{x: '{one}', y: '{other}'}}}}\n", 7, 41, "paths.run_dir",
           f"runs r-x, r-y share the run dir '{folder}'", f"'{other}'")
      for name, one, other, folder in [
          ("dot", "/shared/swruns/r", "/shared/swruns/./r", "/shared/swruns/r"),
          ("trailing-slash", "/shared/r", "/shared/r/", "/shared/r"),
          ("double-slash", "/shared/r", "//shared//r", "/shared/r"),
          ("dot-dot", "/shared/r", "/shared/x/../r", "/shared/r"),
          ("tilde-and-home", "~/r", "${HOME}/r", "${HOME}/r"),
          ("relative", "r", "./r/.", "r"),
      ]],
    case("shared-output-dir-two-spellings", TRAINER + "matrix: {axes: {o: {set: "
         "trainer.axolotl.config.output_dir, values: {x: /data/out/, y: /data/./out}}}}\n",
         5, 73, "trainer.axolotl.config.output_dir",
         "runs r-x, r-y write their output_dir to one folder, '/srv/out' on the "
         "machine"),
    case("shared-absolute-output-dir-two-spellings", "version: 1\nid: r\nruntime: {kind: "
         "native}\ntrainer: {axolotl: {config: {base_model: m, output_dir: /o}, resume: never}}"
         "\ncheckpoint: {on_signal: false}\nmatrix: {axes: {o: {set: trainer.axolotl.config."
         "output_dir, values: {x: //srv/o, y: /srv/o/}}}}\n", 6, 73,
         "trainer.axolotl.config.output_dir", "runs r-x, r-y write their output_dir to "
         "one folder, '/srv/o' on the machine (written '//srv/o', '/srv/o/')"),
    case("shared-output-dir", TRAINER + "matrix: {axes: {a: {x: {}, y: {}}}}\n", 4, 57,
         "trainer.axolotl.config.output_dir",
         "runs r-x, r-y write their output_dir to one folder, '/srv/out' on the machine",
         "make it relative"),
    case("patched-config-file-missing", FILE_CONFIG + "matrix:\n  axes:\n"
         "    lr: {set: trainer.axolotl.config.learning_rate, values: {a: 0.1}}\n", 4, 29,
         "trainer.axolotl.config", "file 'cfg.yaml'", "No such file"),
]


test_each_bad_sweep_is_reported_once_at_the_exact_place = reported_once_test(SWEEPS)


def test_a_patched_config_file_is_read_as_axolotl_reads_it(tmp_path, monkeypatch):
    """A config file's own problem is located in the config file, as for any config."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text("base_model: m\nbase_model: n\n")
    (tmp_path / "run.yaml").write_text(
        FILE_CONFIG + "matrix: {axes: {lr: {set: trainer.axolotl.config.lr, "
        "values: {a: 0.1}}}}\n")
    from tests.compile.diagnostics.harness import validate_json  # noqa: PLC0415

    (found,) = validate_json(["run.yaml"]).diagnostics()
    assert (found["file"], found["line"], found["column"]) == ("cfg.yaml", 2, 1)
    assert "duplicate key 'base_model'" in found["message"]
