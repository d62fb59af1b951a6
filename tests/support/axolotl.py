"""Real Axolotl for the tests: its venvs, a tiny model built offline, a config that trains on CPU.

tests/run installs the oldest release obc supports, Axolotl 0.19.0 with a CPU build of torch,
into a venv of its own, OBC_AXOLOTL_VENV (default /opt/obc-axolotl), which most tests run; and
the newest, 0.21.0 on Python 3.12, into another, OBC_AXOLOTL_NEWEST_VENV (default
/opt/obc-axolotl-0.21), which a few run. The tiny model is a random two-layer Llama with a
byte-level BPE tokenizer (tests/support/programs/tiny_model.py), built once a test run by the
oldest's python, with no hub access, in a folder that containers mount read-only at the same
path. `lora_config` is an Axolotl config that preprocesses, trains a LoRA adapter for two
steps with a checkpoint at each, and merges it, in about 20 s a command on one CPU.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.shared import once_per_run

PROGRAMS = Path(__file__).resolve().parent / "programs"
TESTS = Path(__file__).resolve().parent.parent
# Where a run of lora_config leaves its outputs, relative to the run dir.
OUTPUT_DIR = "outputs/lora"
STEPS = 2


@dataclass(frozen=True)
class TinyModel:
    """The folder tiny_model.py wrote: `model` (save_pretrained) and `data` (alpaca jsonl)."""

    root: Path

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def data(self) -> Path:
        return self.root / "data.jsonl"


def clean_env(home: Path, path: str = "/usr/bin:/bin", **extra: str) -> dict[str, str]:
    """What `env -i PATH=... HOME=... OMP_NUM_THREADS=1` gives a program: no venv active,
    nothing inherited. One OpenMP thread, as torchrun gives each rank: tests/run runs three
    tests at a time on two cores, where torch's threads spin waiting for each other (a
    LLaMA-Factory train fell from 37 steps a second to one to three; docs/tests.md)."""
    return {"PATH": path, "HOME": str(home), "OMP_NUM_THREADS": "1", **extra}


# For Axolotl run directly: the tests have no hub; and with telemetry on and no network,
# `axolotl train` hangs for ever at exit, flushing its events (posthog). obc's jobs set
# AXOLOTL_DO_NOT_TRACK themselves, and their run files set HF_HUB_OFFLINE.
OFFLINE = {"HF_HUB_OFFLINE": "1", "AXOLOTL_DO_NOT_TRACK": "1"}


def installed_venv(venv: Path, title: str, variable: str) -> Path:
    """A trainer's venv that tests/run installed; a test that needs it fails without it."""
    if not (venv / "obc-installed").is_file():
        pytest.fail(f"no {title} venv at {venv} ({variable}): tests/run installs it")
    return venv


def built_tiny_model(venv: Path, tmp_path_factory: pytest.TempPathFactory, name: str,
                     finish: Callable[[Path], None], **env: str) -> Path:
    """The folder where `venv`'s python ran tiny_model.py with no hub, its `model`
    (save_pretrained) and `data.jsonl` (alpaca rows), then `finish` shaped it for a trainer:
    once a test run (about ten seconds of processor time each)."""
    def build(root: Path) -> None:
        home = tmp_path_factory.mktemp(f"tiny-{name}-home")
        result = subprocess.run([str(venv / "bin" / "python"), str(PROGRAMS / "tiny_model.py"),
                                 str(root)],
                                env=clean_env(home, **{"HF_HUB_OFFLINE": "1", **env}),
                                capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, result.stderr
        finish(root)

    return once_per_run(tmp_path_factory, f"tiny-{name}", build)


@dataclass(frozen=True)
class Release:
    """A release of Axolotl the tests run: the venv tests/run installs it into from its pins
    (the variable that names the venv, and its default)."""

    variable: str
    default: str
    requirements: str

    @property
    def venv(self) -> Path:
        return Path(os.environ.get(self.variable, self.default))

    @property
    def version(self) -> str:
        """The release the requirements pin (axolotl==X.Y.Z)."""
        text = (TESTS / self.requirements).read_text(encoding="utf-8")
        (pin,) = [line for line in text.splitlines() if line.startswith("axolotl==")]
        return pin.removeprefix("axolotl==")


OLDEST = Release("OBC_AXOLOTL_VENV", "/opt/obc-axolotl", "axolotl-requirements.txt")
NEWEST = Release("OBC_AXOLOTL_NEWEST_VENV", "/opt/obc-axolotl-0.21",
                 "axolotl-newest-requirements.txt")


def release_venv(release: Release) -> Path:
    return installed_venv(release.venv, f"Axolotl {release.version}", release.variable)


@pytest.fixture(scope="session")
def axolotl_venv() -> Path:
    """The oldest release's venv, which most tests run."""
    return release_venv(OLDEST)


@pytest.fixture(scope="session")
def axolotl_newest_venv() -> Path:
    return release_venv(NEWEST)


@pytest.fixture(scope="session")
def tiny_model(axolotl_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> TinyModel:
    return TinyModel(built_tiny_model(axolotl_venv, tmp_path_factory, "axolotl",
                                      readable_by_all, **OFFLINE))


def readable_by_all(root: Path) -> None:
    """save_pretrained writes the weights 0600: a container step that runs as another user
    must still read them."""
    for path in (root, *root.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


def lora_config(model: TinyModel, **overrides: object) -> dict:
    """An Axolotl config for the tiny model that runs on CPU: `preprocess` writes the
    tokenized data to last_run_prepared/, `train` leaves the adapter in outputs/lora with
    checkpoint-1 and checkpoint-2, and `merge-lora` the merged model in outputs/lora/merged.
    Paths relative to the working directory, as Axolotl reads them; `overrides` replace or
    add keys."""
    return {
        "base_model": str(model.model),
        "datasets": [{"path": str(model.data), "ds_type": "json", "type": "alpaca"}],
        "dataset_prepared_path": "last_run_prepared",
        "val_set_size": 0,
        "output_dir": f"./{OUTPUT_DIR}",
        # Byte-level BPE makes long sequences: Axolotl drops rows that do not fit, and
        # fails when none is left.
        "sequence_len": 256,
        "adapter": "lora",
        "lora_r": 4,
        "lora_alpha": 8,
        "lora_dropout": 0.0,
        "lora_target_linear": True,
        # Axolotl's LoRA kernels allocate on CUDA.
        "lora_mlp_kernel": False,
        "lora_qkv_kernel": False,
        "lora_o_kernel": False,
        "bf16": False,
        "fp16": False,
        "tf32": False,
        "micro_batch_size": 2,
        "gradient_accumulation_steps": 1,
        "num_epochs": 1,
        "max_steps": STEPS,
        "save_steps": 1,
        "learning_rate": 0.001,
        "optimizer": "adamw_torch",
        "lr_scheduler": "constant",
        "logging_steps": 1,
        "seed": 0,
        **overrides,
    }


# What a train and merge-lora of `lora_config` leave in OUTPUT_DIR, of what matters: the
# adapter, each checkpoint's adapter and trainer state, and the merged model.
OUTPUTS = ("adapter_model.safetensors", "adapter_config.json",
           *(f"checkpoint-{step}/{name}" for step in range(1, STEPS + 1)
             for name in ("adapter_model.safetensors", "trainer_state.json")),
           "merged/model.safetensors", "merged/config.json")


def missing_outputs(run_dir: Path) -> list[str]:
    """The OUTPUTS that are not in the run dir."""
    return [name for name in OUTPUTS if not (run_dir / OUTPUT_DIR / name).is_file()]


def host_python_mounts(venv: Path) -> list[dict]:
    """Read-only mounts, each at its own path, that let a container with no Python of its
    own run the venv: the venv, the Python it was made from, and the host's libraries."""
    python_home = Path(os.path.realpath(venv / "bin" / "python")).parents[1]
    pairs = [(venv, venv), (python_home, python_home)]
    pairs += [(Path(folder).resolve(), Path(folder)) for folder in ("/usr/lib", "/lib", "/lib64")
              if Path(folder).exists()]
    return [{"source": str(source), "target": str(target), "readonly": True}
            for source, target in pairs]


@pytest.fixture(scope="session")
def axolotl_image(podman, test_image_tar: tuple[str, bytes], axolotl_venv: Path) -> str:
    """The busybox test image with the Axolotl venv first on its PATH, as Axolotl's own
    images have theirs; the venv itself is mounted (host_python_mounts)."""
    path = f"{axolotl_venv}/bin:/usr/local/bin:/usr/bin:/bin"
    _, tar = test_image_tar
    image = f"localhost/obc-axolotl-test:{hashlib.sha256(tar + path.encode()).hexdigest()[:12]}"
    if podman("image", "inspect", image, check=False).returncode != 0:
        result = subprocess.run([podman.name, "import", "--change", f"ENV PATH={path}", "-",
                                 image], input=tar, capture_output=True, timeout=120,
                                env={**os.environ, **podman.env}, check=False)
        assert result.returncode == 0, result.stderr.decode()
    return image
