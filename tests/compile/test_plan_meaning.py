"""The parts of `obc plan`: a job's meaning and its record in the script, the field changes
read from two meanings (generic over the model), the bill of materials, and the inputs hash
in the header."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from pathlib import Path

import pytest

from compiler.core import shell
from compiler.model.gpu_hours import compute, time_limit_hours
from compiler.model.job import Job
from compiler.pipeline.pipeline import Options, compile_files
from compiler.plan.bill import bill_of
from compiler.plan.diff import FieldChange, diff_meaning
from compiler.render.meaning import meaning, read_record, record_lines
from tests.conftest import REPO

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def job_of(folder: Path, text: str, lock: Path | None = None) -> Job:
    run_file = folder / "run.yaml"
    run_file.write_text(text, encoding="utf-8")
    result = compile_files([run_file], options=Options(lock=lock))
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    return result.scripts[0].job


def changes(old: Job, new: Job) -> list[str]:
    return [change.text() for change in diff_meaning(meaning(old), meaning(new))]


NATIVE = "version: 1\nid: j\nruntime: {kind: native}\nsteps: [{name: a, run: [echo, hi]}]\n"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_the_record_in_a_script_reads_back_as_the_jobs_meaning(example, monkeypatch):
    monkeypatch.chdir(REPO)
    scripts = compile_files([example.relative_to(REPO)]).scripts
    assert scripts  # one, or a sweep's runs
    for script in scripts:
        assert read_record(script.text) == meaning(script.job)
        # The record is the script's last two lines: the marker, then one line of JSON.
        *_, marker, record, end = script.text.split("\n")
        assert marker.startswith("# --- obc plan record 3") and record.startswith("# {")
        assert end == ""


def test_a_script_without_a_readable_record_has_no_meaning(tmp_path):
    text = compile_files([_write(tmp_path, NATIVE)]).scripts[0].text
    assert read_record(text.replace("# --- obc plan record", "# --- a record")) is None
    assert read_record(text.replace('"id":"j",', '"id":"j"')) is None  # no comma
    assert read_record(text.replace('\n# {"id"', '\n# ["id"', 1)) is None


def test_a_record_2_over_a_line_per_field_still_reads(tmp_path):
    job = job_of(tmp_path, NATIVE)
    lines = json.dumps(meaning(job), indent=2).split("\n")
    old = "# --- obc plan record 2: what this job means, as `obc plan` reads it back ---\n"
    assert read_record(old + "".join(f"# {line}\n" for line in lines)) == meaning(job)


def _write(folder: Path, text: str) -> Path:
    path = folder / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_field_the_model_gains_is_compared_and_named_by_its_path(tmp_path):
    @dataclasses.dataclass(frozen=True, slots=True)
    class ResumingJob(Job):
        resume_from: str | None = None
        max_retries: int = 0

    job = job_of(tmp_path, NATIVE)
    grown = ResumingJob(**{f.name: getattr(job, f.name) for f in dataclasses.fields(job)})
    # A field gained that holds nothing is no change: an upgrade does not change every
    # script that does not use it. One that holds a value (0 is one) is.
    assert changes(job, grown) == ["max retries added (0)"]
    later = dataclasses.replace(grown, resume_from="last", max_retries=3)
    assert changes(grown, later) == ["resume from none → last", "max retries 0 → 3"]
    assert read_record(_record_text(later)) == meaning(later)


def _record_text(job: Job) -> str:
    return "\n".join("# " + line for line in record_lines(job)) + "\n"


def test_a_runtime_variant_the_model_gains_is_recorded_by_its_type(tmp_path):
    @dataclasses.dataclass(frozen=True, slots=True)
    class Apptainer:
        image: str
        writable_tmpfs: bool = False

    job = job_of(tmp_path, NATIVE)
    other = dataclasses.replace(job, runtime=Apptainer("docker://busybox:1.36"))
    assert meaning(other)["runtime"] == {"type": "apptainer", "image": "docker://busybox:1.36",
                                         "writable_tmpfs": False}
    assert changes(job, other) == ["runtime native → apptainer"]
    bill = bill_of(other)
    assert (bill.runtime, [image.reference for image in bill.images]) == (
        "apptainer", ["docker://busybox:1.36"])


@pytest.mark.parametrize(("before", "after", "text"), [
    ("a:1@sha256:" + "1" * 64, "a:1@sha256:" + "2" * 64, "image digest changed"),
    ("a:1", "a:1@sha256:" + "2" * 64, "image pinned by digest"),
    ("a:1@sha256:" + "1" * 64, "a:1", "image no longer pinned by digest"),
    ("a:1", "a:2", "image a:1 → a:2"),
])
def test_image_changes(before, after, text):
    (change,) = diff_meaning({"runtime": {"type": "container", "image": before}},
                             {"runtime": {"type": "container", "image": after}})
    assert change.text() == text


def test_text_kept_as_its_hash_says_only_that_it_changed(tmp_path):
    job = job_of(tmp_path, "description: |\n  one\n  two\n" + NATIVE)
    other = dataclasses.replace(job, description="one\nthree\n")
    assert changes(job, other) == ["description changed"]
    assert meaning(job)["description"] == {
        "sha256": hashlib.sha256(b"one\ntwo\n").hexdigest()}


def test_order_counts_for_steps_and_not_for_env():
    old = {"steps": {"a": {"argv": ["x"]}, "b": {"argv": ["y"]}}, "env": {"A": "1", "B": "2"}}
    new = {"steps": {"b": {"argv": ["y"]}, "a": {"argv": ["x"]}}, "env": {"B": "2", "A": "1"}}
    assert diff_meaning(old, new) == [FieldChange(("steps",), "reordered", ["a", "b"],
                                                  ["b", "a"])]


def test_a_field_one_record_lacks_and_the_other_holds_empty_is_no_change():
    old = {"id": "a", "steps": {"train": {"argv": ["x"]}}}
    new = {"id": "a", "steps": {"train": {"argv": ["x"]}}, "stages": [], "stage": None,
           "health": None, "notify": {}}
    assert diff_meaning(old, new) == []
    assert diff_meaning(new, old) == []
    assert [c.text() for c in diff_meaning(old, {**new, "health": {"timeout": 120}})] == \
        ["health added"]


def test_an_empty_collection_then_items_reads_as_items_added():
    old, new = {"env": [], "slurm": None}, {"env": {"A": "1"}, "slurm": {"nodes": 2}}
    assert [c.text() for c in diff_meaning(old, new)] == ["env A added (1)", "slurm added"]
    assert [c.text() for c in diff_meaning(new, old)] == ["env A removed", "slurm removed"]


@pytest.mark.parametrize(("time", "hours"), [
    ("90", 1.5), ("30:00", 0.5), ("24:00:00", 24), ("2-12", 60), ("1-00:30", 24.5),
    ("0-01:30:36", 1.51), ("UNLIMITED", None), ("INFINITE", None),
])
def test_slurm_time_limits_in_hours(time, hours):
    assert time_limit_hours(time) == hours


@pytest.mark.parametrize(("runtime", "slurm", "text"), [
    ("{kind: native, gpus: [0, 1, 2]}", "", "3 GPUs × 1 node × no time limit = unbounded"),
    ("{kind: docker, gpus: none}", "", "0 GPUs × 1 node × no time limit = 0 GPU-hours"),
    ("{kind: docker}", "", "all GPUs of 1 node × no time limit = unbounded"),
    ("{kind: native}", "slurm: {time: '2-00:00:00', gpus_per_node: 4, nodes: 3}\n",
     "4 GPUs × 3 nodes × 48 h = 576 GPU-hours"),
    ("{kind: native}", "slurm: {time: 45, gpus_per_node: 1}\n",
     "1 GPU × 1 node × 0.75 h = 0.75 GPU-hours"),
    ("{kind: native}", "slurm: {gpus_per_node: 8}\n",
     "8 GPUs × 1 node × no time limit = unbounded"),
    ("{kind: native}", "slurm: {time: '12:00:00', gpus_per_node: 2, nodes: 2, max_restarts: 3}\n",
     "2 GPUs × 2 nodes × 12 h × 4 runs (slurm.max_restarts 3) = 192 GPU-hours"),
])
def test_gpu_hours(tmp_path, runtime, slurm, text):
    job = job_of(tmp_path, f"version: 1\nid: j\nruntime: {runtime}\n"
                           f"steps: [{{name: a, run: [echo]}}]\n{slurm}")
    assert compute(job).text() == text


@pytest.mark.parametrize(("extra", "hosts"), [
    ("", ["docker.io", "huggingface.co"]),
    ("env: {WANDB_PROJECT: p}\n", ["docker.io", "huggingface.co", "api.wandb.ai"]),
    ("secrets: [WANDB_API_KEY]\n", ["docker.io", "huggingface.co", "api.wandb.ai"]),
    ("env: {HF_HUB_OFFLINE: '1', WANDB_MODE: offline, WANDB_PROJECT: p}\n", ["docker.io"]),
    ("env: {HF_HUB_OFFLINE: 'yes', WANDB_MODE: disabled, WANDB_PROJECT: p}\n", ["docker.io"]),
    ("env: {HF_HUB_OFFLINE: '0', WANDB_MODE: online, WANDB_PROJECT: p}\n",
     ["docker.io", "huggingface.co", "api.wandb.ai"]),
])
def test_egress_unless_turned_off(tmp_path, extra, hosts):
    # A job of the user's own programs: W&B when the run file gives them its project or key.
    job = job_of(tmp_path, "version: 1\nid: j\nruntime: {kind: docker}\n"
                           f"steps: [{{name: a, run: [echo]}}]\n{extra}")
    assert [egress.host for egress in bill_of(job).egress] == hosts


@pytest.mark.parametrize(("trainer", "wandb"), [
    ("{axolotl: {config: {base_model: b}}}", False),
    ("{axolotl: {config: {base_model: b, wandb_project: p}}}", True),
    ("{axolotl: {config: {base_model: b}, args: [--wandb-project, p]}}", True),
    ("{axolotl: {config: {base_model: b}, args: [--wandb_project=p]}}", True),
    ("{axolotl: {config: {base_model: b, wandb_project: ''}}}", False),
    ("{trl: {config: {model_name_or_path: m, dataset_name: d}}}", False),
    ("{trl: {config: {model_name_or_path: m, dataset_name: d, report_to: wandb}}}", True),
    ("{trl: {config: {model_name_or_path: m, dataset_name: d, report_to: [tensorboard]}}}",
     False),
    ("{trl: {config: {model_name_or_path: m, dataset_name: d, report_to: all}}}", True),
])
def test_a_trainer_reaches_wandb_only_when_its_config_switches_it_on(tmp_path, trainer, wandb):
    # Axolotl and transformers read no environment variable that switches W&B on: a
    # WANDB_PROJECT or key given to a trainer that does not report there reaches nothing.
    job = job_of(tmp_path, "version: 1\nid: j\nruntime: {kind: native}\n"
                           f"trainer: {trainer}\nenv: {{WANDB_PROJECT: p}}\n"
                           "secrets: [WANDB_API_KEY]\n")
    hosts = [egress.host for egress in bill_of(job).egress]
    assert hosts == ["huggingface.co", *(["api.wandb.ai"] if wandb else [])]


def test_a_container_without_network_reaches_only_its_registry(tmp_path):
    job = job_of(tmp_path, "version: 1\nid: j\nruntime: {kind: podman, image: "
                           "'quay.io/org/img:1', extra_args: [--network=none]}\n"
                           "steps: [{name: a, run: [echo]}]\n")
    assert [(e.host, e.purpose) for e in bill_of(job).egress] == [
        ("quay.io", "pulls the image quay.io/org/img:1 if the machine lacks it")]


def test_axolotl_pushing_to_the_hub_is_egress_even_offline(tmp_path):
    job = job_of(tmp_path, "version: 1\nid: j\nruntime: {kind: native}\n"
                           "trainer: {axolotl: {config: {base_model: b, hub_model_id: me/m}}}\n"
                           "env: {HF_HUB_OFFLINE: '1', WANDB_MODE: offline}\n")
    assert [e.purpose for e in bill_of(job).egress] == [
        "Axolotl pushes the model to the Hub repository me/m (hub_model_id in axolotl.yaml)"]


@pytest.mark.parametrize(("config", "purposes"), [
    ("{push_to_hub: true, hub_model_id: me/m}",
     ["TRL pushes the model to the Hub repository me/m (push_to_hub in trl.yaml)"]),
    ("{push_to_hub: true, output_dir: out/sft}",
     ["TRL pushes the model to the Hub repository <the token's user>/sft (push_to_hub in "
      "trl.yaml)"]),
    ("{hub_model_id: me/m}", []),
])
def test_trl_pushing_to_the_hub_is_egress_even_offline(tmp_path, config, purposes):
    job = job_of(tmp_path, "version: 1\nid: j\nruntime: {kind: native}\n"
                           f"trainer: {{trl: {{config: {config}}}}}\n"
                           "env: {HF_HUB_OFFLINE: '1', WANDB_MODE: offline}\n")
    assert [e.purpose for e in bill_of(job).egress] == purposes


def test_privileges_name_what_obc_adds_and_what_the_run_file_adds(tmp_path):
    job = job_of(tmp_path, "version: 1\nid: j\nruntime: {kind: docker, user: '1000:1000', "
                           "extra_args: [--cap-add=SYS_PTRACE]}\n"
                           "steps: [{name: a, run: [echo]}]\nslurm: {nodes: 2, "
                           "gpus_per_node: 1}\n")
    assert [(p.option, p.added_by) for p in bill_of(job).privileges] == [
        ("--user 1000:1000", "obc"), ("--init", "obc"), ("--gpus all", "obc"),
        ("--ulimit memlock=-1", "obc"), ("--ulimit stack=67108864", "obc"),
        ("--ipc=host", "obc"), ("--network=host", "obc"), ("--cap-add=SYS_PTRACE", "run file")]


def test_the_bill_and_header_show_engine_options_as_the_script_passes_them(tmp_path):
    job = job_of(tmp_path, "version: 1\nid: j\nruntime: {kind: podman, extra_args: "
                           "[-itlx=y, --rm, '--env=A=b c']}\nsteps: [{name: a, run: [echo]}]\n")
    script = compile_files([tmp_path / "run.yaml"]).scripts[0].text
    passed = shlex.split(script.split(" \\\n    -- ")[0].rsplit("\n", 1)[1])

    assert passed == ["--interactive", "--tty", "--label=x=y", "--rm", "--env=A=b c"]
    assert [p.option for p in bill_of(job).privileges if p.added_by == "run file"] == passed
    assert f"\n#             engine options {shell.join_words(passed)}\n" in script


def test_header_names_the_inputs_by_a_hash_anyone_can_recompute(tmp_path):
    (tmp_path / "plugin.py").write_text("x = 1\n", encoding="utf-8")
    lock = tmp_path / "obc.lock"
    digest = "sha256:" + "d" * 64
    lock.write_text(f"reg.example/img:1 {digest}\nreg.example/other:2 {'sha256:' + 'e' * 64}\n",
                    encoding="utf-8")
    text = ("version: 1\nid: j\nruntime: {kind: docker, image: 'reg.example/img:1'}\n"
            "files: {p.py: plugin.py}\nsteps: [{name: a, run: [python, p.py]}]\n")
    job = job_of(tmp_path, text, lock)

    def sha(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    listing = (f"run-file {sha(text.encode())}\n"
               f"files[\"p.py\"] {sha(b'x = 1' + bytes([10]))}\n"
               f"lock reg.example/img:1 {digest}\n")
    assert job.inputs == f"sha256:{sha(listing.encode())}"
    script = compile_files([tmp_path / "run.yaml"], options=Options(lock=lock)).scripts[0].text
    assert f"\n# inputs      {job.inputs}\n" in script

    lock.write_text(f"reg.example/img:1 {digest}\n", encoding="utf-8")  # another image's entry
    assert job_of(tmp_path, text, lock).inputs == job.inputs
    for changed in (text + "# a comment\n", text.replace("img:1", "img:2")):
        assert job_of(tmp_path, changed, lock).inputs != job.inputs
    (tmp_path / "plugin.py").write_text("x = 2\n", encoding="utf-8")
    assert job_of(tmp_path, text, lock).inputs != job.inputs


@pytest.mark.parametrize("body", ["[" * 100_000, '{"a": ' * 20 + "1" + "}" * 20])
def test_a_record_nested_beyond_any_meaning_is_not_read(body):
    assert read_record(f"# --- obc plan record 3: what this job means, as `obc plan` reads "
                       f"it back ---\n# {body}\n") is None


def test_text_from_a_record_on_disk_is_shown_visible():
    old = {"env": {"A\x1b[2J": "x\u202ey"}}
    assert [change.text() for change in diff_meaning(old, {"env": {}})] == [
        "env A\\x1b[2J removed"]
    assert [change.text() for change in diff_meaning({"env": {"A": "x\u202ey"}},
                                                     {"env": {"A": "z"}})] == [
        "env A x\\u202ey → z"]
