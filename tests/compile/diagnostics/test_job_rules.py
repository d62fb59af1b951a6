"""Rules about what a job does where it runs: credentials stay out of the script, paths use
${NAME} for the machine's variables, containers and Slurm jobs get only options that keep the
job's guarantees. Each bad file is reported once, at its place, by validate and compile."""

from __future__ import annotations

import pytest

from tests.compile.diagnostics.corpus import (
    BASE,
    STEPS,
    assert_reported_once,
    case,
    reported_once_test,
    with_runtime,
    write_case,
)
from tests.compile.diagnostics.harness import run_obc

NATIVE = "version: 1\nid: r\nruntime: {kind: native}\n" + STEPS
TOKEN = "hf_" + "aB3" * 12


def with_steps_nodes(nodes: str) -> str:
    return BASE.replace(STEPS, "") + f"steps: [{{name: a, run: [x], nodes: {nodes}}}]\n"


def with_output_dir(path: str) -> str:
    return ("version: 1\nid: r\nruntime: {kind: docker}\n"
            f"trainer: {{axolotl: {{config: {{base_model: m, output_dir: {path}}}}}}}\n")


BAD = [
    case("output-dir-outside-mounts", with_output_dir("/data/x"), 4, 57,
         "trainer.axolotl.config.output_dir", "'/data/x' is in no folder the container mounts",
         "under a mount"),
    # Normalised first: `..` leaves the run dir (this was a traceback when checkpoints mapped it).
    case("output-dir-dotdot-out-of-run-dir", with_output_dir("/workspace/run/../x"), 4, 57,
         "trainer.axolotl.config.output_dir", "is in no folder the container mounts"),
    # A relative output_dir is in the run dir, which preflight checks; `..` would leave it
    # for a folder no check covers (and, in a container, one it does not mount).
    *[case(f"output-dir-relative-leaves-run-dir-{kind}",
           with_output_dir(path).replace("docker", kind), 4, 57,
           "trainer.axolotl.config.output_dir",
           f"'{path}' leaves the run dir, and no check covers where it leads",
           "or make it absolute")
      for kind, path in [("docker", "../x"), ("native", "out/../../x")]],
    case("credential-name-in-env", BASE + "env:\n  HF_TOKEN: abc\n", 6, 3, "env.HF_TOKEN",
         "'HF_TOKEN' looks like the name of a credential", "written into the script",
         "secrets: [HF_TOKEN]", "secret: false"),
    case("api-key-in-env", BASE + "env:\n  WANDB_API_KEY: abc\n", 6, 3, "env.WANDB_API_KEY",
         "looks like the name of a credential"),
    case("password-in-env", BASE + "env:\n  DB_PASSWORD: abc\n", 6, 3, "env.DB_PASSWORD",
         "looks like the name of a credential"),
    case("token-value-in-env", BASE + f"env:\n  NOTE: {TOKEN}\n", 6, 9, "env.NOTE",
         "this value looks like an access token", "secrets: [NOTE]"),
    case("secret-true-is-not-an-opt-out", BASE + "env:\n  K: {value: v, secret: true}\n",
         6, 25, "env.K.secret", "can only be false"),
    case("dollar-path", BASE + "paths:\n  run_dir: $SCRATCH/runs\n", 6, 12, "paths.run_dir",
         "'$' is only for ${NAME}", "write ${SCRATCH}"),
    case("dollar-venv", "version: 1\nid: r\nruntime: {kind: native, venv: /a/$V}\n" + STEPS,
         3, 31, "runtime.venv", "'$' is only for ${NAME}", "write ${V}"),
    case("lone-dollar-path", BASE + "paths:\n  cache_dir: /c/$\n", 6, 14, "paths.cache_dir",
         "'$' is only for ${NAME}", "no other $"),
    case("obc-variable-in-path", BASE + "paths:\n  run_dir: ${OBC_RUN_DIR}/x\n", 6, 12,
         "paths.run_dir", "names starting with OBC_"),
    case("secret-in-path", BASE + "secrets: [HF_TOKEN]\npaths:\n  run_dir: /r/${HF_TOKEN}\n",
         7, 12, "paths.run_dir", "${HF_TOKEN} is a secret"),
    case("home-in-container-env", BASE + "env:\n  HOME: /h\n", 6, 3, "env.HOME",
         "'HOME' cannot be set by a run file", "that the steps' user can write"),
    case("path-in-native-env", NATIVE + "env:\n  PATH: /v/bin\n", 6, 3, "env.PATH",
         "the job sets it from runtime.venv", "runtime.env_file"),
    case("virtual-env-in-native-env", NATIVE + "env:\n  VIRTUAL_ENV: /v\n", 6, 3,
         "env.VIRTUAL_ENV", "the job sets it from runtime.venv"),
    case("step-named-like-a-trainer-step",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer: {axolotl: {config: {}}}\n"
         "steps: [{name: merge, run: [x]}]\n", 5, 16, "steps[0].name",
         "step name 'merge' is taken by trainer.axolotl", "such as evaluate"),
    case("user-on-native", with_runtime("  kind: native\n  user: root\n"), 5, 3, "runtime.user",
         "only applies to docker and podman, not to native"),
    case("user-bad", with_runtime("  kind: docker\n  user: alice\n"), 5, 9, "runtime.user",
         "write invoker, root, or a uid:gid"),
    case("nodes-bad", with_steps_nodes("everywhere"), 4, 36, "steps[0].nodes",
         "'everywhere' is not one of all, first"),
    case("signal-not-to-the-script", BASE + "slurm: {signal: 'TERM@120'}\n", 5, 17,
         "slurm.signal", "goes to the job's steps, not to job.sh", "write B:TERM@120"),
    case("signal-not-trapped", BASE + "slurm: {signal: 'B:KILL@120'}\n", 5, 17, "slurm.signal",
         "job.sh stops its step on TERM, INT, HUP, USR1, USR2, not on KILL"),
    case("stop-timeout-longer-than-the-lead",
         "version: 1\nid: r\nruntime: {kind: docker, stop_timeout: 300}\n" + STEPS +
         "slurm: {signal: 'B:TERM@120'}\n", 3, 39, "runtime.stop_timeout",
         "gives its step 300 s to stop", "only 120 s before the time limit"),
    case("default-stop-timeout-against-a-short-lead", BASE + "slurm: {signal: 'B:TERM@30'}\n",
         5, 17, "slurm.signal", "gives its step 60 s to stop", "only 30 s"),
    case("grace-and-timeout-longer-than-the-lead",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer: {axolotl: {config: {}}}\n"
         "checkpoint: {grace: 90}\nslurm: {signal: 'B:TERM@120'}\n", 5, 21,
         "checkpoint.grace", "waits up to 90 s for a checkpoint, then gives its step 60 s"),
    # Issue 20: the signal must come before the time limit, early enough for the stop.
    case("time-shorter-than-the-signal", BASE + "slurm: {time: '00:01:00'}\n", 5, 15,
         "slurm.time", "a time limit of 60 s", "signals 120 s before it", "time: 4"),
    case("time-within-lead-and-stop", BASE + "slurm: {time: 3}\n", 5, 15, "slurm.time",
         "a time limit of 180 s", "120 s before it", "60 s for its step"),
    case("time-against-grace-and-stop",
         "version: 1\nid: r\nruntime: {kind: docker}\ntrainer: {axolotl: {config: {}}}\n"
         "checkpoint: {grace: 90}\nslurm: {signal: 'B:USR1@300', time: '00:07:00'}\n", 6, 37,
         "slurm.time", "a time limit of 420 s", "300 s before it", "90 s for a checkpoint"),
    *[case(f"zero-time-{name}", BASE + f"slurm: {{time: '{time}'}}\n", 5, 15, "slurm.time",
           "a time limit of zero is no limit to Slurm", "UNLIMITED")
      for name, time in [("clock", "00:00:00"), ("minutes-seconds", "0:0"),
                         ("days-hours", "0-0"), ("minutes", "0"), ("days-clock", "0-00:00:00")]],
    case("restarts-need-a-time-limit-signal",
         BASE + "slurm: {max_restarts: 2, signal: 'B:TERM@300'}\n", 5, 34, "slurm.signal",
         "scancel and preemption send TERM too", "B:USR1@120"),
    # Issue 20: slurm.extra takes options from obc's allow-list (without a site policy),
    # refused where they are given, with the field or the policy rule that allows them.
    *[case(f"extra-refused-{option.partition('=')[0][2:]}",
           BASE + f"slurm: {{extra: [{option}]}}\n", 5, 17, "slurm.extra[0]",
           f"{option.partition('=')[0]} is not allowed by obc's built-in sbatch allow-list",
           f"sbatch: {{allowed: [{option.partition('=')[0][2:]}]}}", *instead)
      for option, *instead in [
          ("--uid=0",), ("--chdir=/tmp", "paths.run_dir"), ("--exclusive",),
          ("--nice=100",), ("--gres=gpu:2", "slurm.gpus_per_node"),
          ("--gpus=8", "slurm.gpus_per_node"), ("--input=/etc/shadow",),
          ("--get-user-env",), ("--wait",), ("--array=1-3", "matrix:"),
          # Variations: another user's group, a priority over the queue, another cluster.
          ("--gid=0",), ("--priority=TOP",), ("--clusters=other",)]],
    case("extra-flag-with-a-value", BASE + "slurm: {extra: [--hold=1]}\n", 5, 17,
         "slurm.extra[0]", "--hold takes no value"),
    case("extra-value-missing", BASE + "slurm: {extra: [--mail-type]}\n", 5, 17,
         "slurm.extra[0]", "--mail-type needs a value", "--mail-type=VALUE"),
    case("checkpoint-without-a-trainer", BASE + "checkpoint: {grace: 10}\n", 5, 1,
         "checkpoint", "only applies to a trainer (trainer.axolotl, trainer.torchrun; "
         "trainer.trl and trainer.llamafactory in a native job)"),
    case("stop-timeout-zero", with_runtime("  kind: native\n  stop_timeout: 0\n"), 5, 17,
         "runtime.stop_timeout", "must be at least 1"),
    case("network-on-several-nodes",
         "version: 1\nid: r\nruntime: {kind: docker, extra_args: [--network=bridge]}\n" + STEPS
         + "slurm: {nodes: 2, gpus_per_node: 1}\n", 3, 38, "runtime.extra_args[0]",
         "uses the hosts' network (--network=host)"),
    case("launcher-on-several-nodes",
         "version: 1\nid: r\nruntime: {kind: docker}\n"
         "trainer: {axolotl: {config: {}, args: [--launcher, accelerate]}}\n"
         "slurm: {nodes: 2, gpus_per_node: 1}\n", 4, 40, "trainer.axolotl.args[0]",
         "obc gives --launcher itself"),
    # A URL that holds a token would be in the committed script: it is a secret, by name.
    *[case(f"notify-url-{name}", BASE + f"notify: {{on: [done], url: '{url}'}}\n", 5, 27,
           "notify.url", why, "it would be written into the script", "url: {secret: NAME}")
      for name, url, why in [
          ("userinfo", "https://bot:pw@chat.example.com/hook", "holds a user or password"),
          ("token-query", "https://chat.example.com/hook?token=abc",
           "query parameter 'token', which looks like a credential"),
          ("token-path", "https://hooks.slack.com/services/T0001/B0001/XyZ12aBc34dEf56gHi78jKl9",
           "has a path that looks like it holds a token")]],
    case("notify-command-and-url", BASE + "notify: {on: [done], command: [x], url: 'http://h/'}\n",
         5, 9, "notify", "either command or url"),
    case("notify-url-secret-reserved", BASE + "notify: {on: [done], url: {secret: OBC_URL}}\n",
         5, 36, "notify.url.secret", "cannot hold notify's URL"),
]


test_each_job_rule_is_reported_once_at_the_exact_place = reported_once_test(BAD)


GOOD = [
    # Words that only contain a credential's: a tokenizer setting, a count of tokens.
    BASE + "env:\n  TOKENIZERS_PARALLELISM: 'false'\n  MAX_TOKENS: 512\n",
    # A name like a credential's, said not to be secret.
    BASE + "env:\n  CACHE_KEY: {value: v3, secret: false}\n",
    BASE + "paths:\n  run_dir: ${SCRATCH}/runs/${SLURM_JOB_ID}\n  cache_dir: ~/hf\n",
    with_runtime("  kind: docker\n  mounts: [{source: '${DATA}/sets', target: /data}]\n"),
    with_runtime("  kind: docker\n  user: '1000:1000'\n  stop_timeout: 30\n"),
    "version: 1\nid: r\nruntime: {kind: docker}\n"
    "trainer: {axolotl: {config: {}, args: [--learning-rate, '1e-4']}}\n"
    "steps: [{name: evaluate, run: [axolotl, evaluate, axolotl.yaml]}]\n",
    BASE + "slurm: {signal: 'B:USR1@300'}\n",
    # Slurm counts whole minutes: 181 s is 4 minutes, past 120 s of lead and 60 s of stop.
    BASE + "slurm: {time: '00:03:01'}\n",
    BASE + "slurm: {time: UNLIMITED}\n",
    # The allow-list, with each arity: a flag, a value, an optional value given or not.
    BASE + "slurm: {extra: [--hold, --mail-type=END, --no-kill, --no-kill=off]}\n",
    "version: 1\nid: r\nruntime: {kind: docker, extra_args: [--network=none]}\n" + STEPS,
    # A plain URL without credentials, and one read from a secret.
    BASE + "notify: {on: [done, gave_up], url: 'https://ci.example.com/hook?channel=ml-1'}\n",
    BASE + "notify: {on: [step_failed], url: {secret: SLACK_WEBHOOK}}\n",
    BASE + "notify: {on: [started], command: [notify-send, obc]}\n",
]


@pytest.mark.parametrize("text", GOOD)
def test_what_only_looks_like_a_broken_rule_is_accepted(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(text)
    outcome = run_obc("validate", "--format", "json", "run.yaml")
    assert (outcome.code, outcome.diagnostics()) == (0, []), outcome


CONFIG_RUN = ("version: 1\nid: r\nruntime: {kind: docker}\n"
              "trainer:\n  axolotl: {config: c.yaml}\n")


def trainer_run(trainer: str) -> str:
    """A run file whose trainer's config is c.yaml, in an image that has the trainer."""
    return CONFIG_RUN.replace("{kind: docker}", "{kind: docker, image: 'ghcr.io/t/t:1'}") \
        .replace("axolotl", trainer)


INLINE_RUN = ("version: 1\nid: r\nruntime: {kind: docker}\ntrainer:\n  axolotl:\n"
              "    config:\n      datasets:\n        - path: data/train.jsonl\n")


@pytest.mark.parametrize("bad", [
    case("config-duplicate-key", CONFIG_RUN, 3, 1, "", "duplicate key 'learning_rate'",
         "keep only the last one", attachments={"c.yaml": "learning_rate: 1\nx: 2\n"
                                                          "learning_rate: 3\n"}),
    # What each trainer does with a duplicate key (PyYAML keeps the last; LLaMA-Factory's
    # OmegaConf refuses the file) is what the hint says.
    case("trl-config-duplicate-key", trainer_run("trl"), 3, 1, "",
         "duplicate key 'learning_rate'", "TRL would silently keep only the last one",
         attachments={"c.yaml": "learning_rate: 1\nx: 2\nlearning_rate: 3\n"}),
    case("llamafactory-config-duplicate-key", trainer_run("llamafactory"), 3, 1, "",
         "duplicate key 'learning_rate'", "LLaMA-Factory refuses",
         attachments={"c.yaml": "learning_rate: 1\nx: 2\nlearning_rate: 3\n"}),
    case("config-tab", CONFIG_RUN, 2, 1, "", "a tab is used for indentation",
         attachments={"c.yaml": "a: 1\n\tb: 2\n"}),
    case("config-not-a-mapping", CONFIG_RUN, 1, 1, "", "does not hold a YAML mapping",
         attachments={"c.yaml": "- a\n"}),
    case("config-unclosed", CONFIG_RUN, 2, 1, "", "never closed",
         attachments={"c.yaml": "a: [\n"}),
])
def test_a_broken_trainer_config_is_reported_in_the_config_itself(bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_case(tmp_path, bad)
    outcome = run_obc("validate", "--format", "json", "run.yaml")
    assert outcome.code == 1
    (found,) = outcome.diagnostics()
    assert (found["file"], found["line"], found["column"]) == ("c.yaml", bad.line, bad.column)
    said = found["message"] + " " + (found["hint"] or "")
    assert all(word in said for word in bad.words), found


CONFIG_FILES = [
    case("config-relative-dataset", CONFIG_RUN, 5, 21, "trainer.axolotl.config",
         "c.yaml:2:11: datasets[0].path: './data/train.jsonl' is a path in the run dir, "
         "where nothing puts it", "files: {./data/train.jsonl:",
         attachments={"c.yaml": "datasets:\n  - path: ./data/train.jsonl\n    type: alpaca\n"}),
    case("config-relative-deepspeed", CONFIG_RUN, 5, 21, "trainer.axolotl.config",
         "c.yaml:1:12: deepspeed: 'deepspeed_configs/zero3_bf16.json' is a path in the run dir",
         attachments={"c.yaml": "deepspeed: deepspeed_configs/zero3_bf16.json\n"}),
    case("config-data-files", CONFIG_RUN, 5, 21, "trainer.axolotl.config",
         "c.yaml:4:7: datasets[0].data_files[0]: 'train.json'",
         attachments={"c.yaml": "datasets:\n  - path: json\n    data_files:\n"
                                "    - train.json\n"}),
    case("inline-config-relative-dataset", INLINE_RUN, 8, 17,
         "trainer.axolotl.config.datasets[0].path",
         "'data/train.jsonl' is a path in the run dir, where nothing puts it"),
    case("an-axolotl-config-as-a-run-file", "base_model: x\ndatasets: []\nadapter: lora\n",
         1, 1, "", "this is an Axolotl config, not a run file",
         "trainer: {axolotl: {config: run.yaml}}"),
]


@pytest.mark.parametrize("bad", CONFIG_FILES)
def test_a_config_that_names_files_nothing_puts_in_the_run_dir_is_refused(bad, tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert_reported_once(bad, "validate", tmp_path)


def test_config_files_the_run_file_embeds_and_hub_ids_are_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.jsonl").write_text("{}\n")
    (tmp_path / "ds.json").write_text("{}\n")
    (tmp_path / "c.yaml").write_text(
        "datasets:\n  - path: data/train.jsonl\n  - path: tatsu-lab/alpaca\n  - path: squad\n"
        "  - path: /mnt/data/abs.jsonl\ndeepspeed: ./ds/zero3.json\n")
    (tmp_path / "run.yaml").write_text(
        CONFIG_RUN + "files:\n  data/train.jsonl: train.jsonl\n  ds/zero3.json: ds.json\n")
    outcome = run_obc("validate", "--format", "json", "run.yaml")
    assert (outcome.code, outcome.diagnostics()) == (0, []), outcome
