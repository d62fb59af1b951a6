"""The corpus of the apptainer and enroot runtimes: images each reads, options only for the
runtimes they apply to, names their containers cannot be given, and paths they cannot mount.
Each case breaks one rule and is reported once, at its place, by validate and compile."""

from __future__ import annotations

from tests.compile.diagnostics.corpus import STEPS, case, reported_once_test

DIGEST = "sha256:" + "9de7c7a5" * 8


def runtime(lines: str, rest: str = "") -> str:
    """A run file whose runtime mapping (block style, from line 4) is `lines`, then steps
    (and `rest`)."""
    return f"version: 1\nid: r\nruntime:\n{lines}{STEPS}{rest}"


def enroot(lines: str, rest: str = "") -> str:
    """An enroot run file (a slurm block at its end, line 7 with one more runtime line)."""
    return runtime("  kind: enroot\n" + lines, rest + "slurm: {}\n")


APPTAINER = "  kind: apptainer\n  image: /images/a.sif\n"

IMAGES = [
    case("apptainer-without-image", runtime("  kind: apptainer\n"), 4, 3, "runtime.image",
         "an apptainer job needs an image", "a SIF file", "shared storage"),
    case("enroot-without-image", enroot(""), 4, 3, "runtime.image",
         "an enroot job needs an image", "a squashfs file"),
    case("apptainer-image-without-scheme",
         runtime(f"  kind: apptainer\n  image: team/axolotl@{DIGEST}\n"), 5, 10,
         "runtime.image", "apptainer takes a registry's image as docker://NAME@sha256:",
         f"write docker://team/axolotl@{DIGEST}"),
    case("apptainer-image-by-tag", runtime("  kind: apptainer\n  image: docker://team/a:1.0\n"),
         5, 10, "runtime.image", "pin the image by its digest", "apptainer pull"),
    case("apptainer-image-tag-and-digest",
         runtime(f"  kind: apptainer\n  image: docker://registry:5000/team/a:1.0@{DIGEST}\n"),
         5, 10, "runtime.image", "apptainer refuses a tag beside a digest",
         f"write docker://registry:5000/team/a@{DIGEST}"),
    case("image-sha256-of-a-registry-image",
         runtime(f"  kind: apptainer\n  image: docker://team/a@{DIGEST}\n"
                 f"  image_sha256: {DIGEST[7:]}\n"), 6, 3, "runtime.image_sha256",
         "only applies to an image file"),
    case("image-sha256-not-hex", runtime(APPTAINER + "  image_sha256: abc\n"), 6, 17,
         "runtime.image_sha256", "64 lower-case hex digits"),
    case("docker-image-file", runtime("  kind: docker\n  image: /images/a.sif\n"), 5, 10,
         "runtime.image", "docker takes a registry's image, not a file", "apptainer"),
    case("podman-image-with-scheme", runtime("  kind: podman\n  image: docker://team/a:1\n"),
         5, 10, "runtime.image", "podman takes the image without docker://", "write team/a:1"),
    case("enroot-image-with-scheme", enroot("  image: docker://team/a:1\n"), 5, 10,
         "runtime.image", "write the image without docker://"),
    case("enroot-3-digest", enroot(f"  image: nvcr.io/nvidia/pytorch:24.01-py3@{DIGEST}\n"),
         5, 10, "runtime.image", "enroot 3 takes no digest", "enroot import -o",
         "runtime.enroot_version: 4"),
    case("enroot-4-sha512", enroot("  enroot_version: 4\n  image: team/a@sha512:" + "ab" * 64
                                   + "\n"), 6, 10, "runtime.image",
         "enroot takes sha256 digests only"),
    case("enroot-version-2", enroot("  image: /a.sqsh\n  enroot_version: 2\n"), 6, 19,
         "runtime.enroot_version", "must be at least 3"),
    case("image-path-bare-variable", runtime("  kind: apptainer\n  image: $IMAGES/a.sif\n"), 5, 10,
         "runtime.image", "is not a valid image reference", "${VARIABLE}/"),
    case("image-path-bare-variable-inside",
         runtime("  kind: apptainer\n  image: ${IMAGES}/$V/a.sif\n"), 5, 10, "runtime.image",
         "'$' is only for ${NAME}", "write ${V}"),
    case("image-path-names-a-secret",
         runtime("  kind: apptainer\n  image: ${HF_TOKEN}/a.sif\n", "secrets: [HF_TOKEN]\n"),
         5, 10, "runtime.image", "${HF_TOKEN} is a secret"),
]

OPTIONS = [
    case("cleanenv-on-docker", runtime("  kind: docker\n  cleanenv: false\n"), 5, 3,
         "runtime.cleanenv", "only applies to runtime.kind apptainer, not to docker"),
    case("contain-on-enroot", enroot("  image: /a.sqsh\n  contain: false\n"), 6, 3,
         "runtime.contain", "only applies to runtime.kind apptainer, not to enroot"),
    case("enroot-version-on-apptainer", runtime(APPTAINER + "  enroot_version: 4\n"), 6, 3,
         "runtime.enroot_version", "only applies to runtime.kind enroot, not to apptainer"),
    case("image-sha256-on-podman", runtime(f"  kind: podman\n  image_sha256: {DIGEST[7:]}\n"),
         5, 3, "runtime.image_sha256", "only applies to apptainer and enroot, not to podman"),
    case("shm-size-on-apptainer", runtime(APPTAINER + "  shm_size: 16g\n"), 6, 3,
         "runtime.shm_size", "only applies to docker and podman, not to apptainer"),
    case("user-on-enroot", enroot("  image: /a.sqsh\n  user: root\n"), 6, 3, "runtime.user",
         "only applies to docker and podman, not to enroot"),
    case("extra-args-on-apptainer", runtime(APPTAINER + "  extra_args: [--fakeroot]\n"), 6, 3,
         "runtime.extra_args", "only applies to docker and podman, not to apptainer"),
    case("enroot-without-slurm", runtime("  kind: enroot\n  image: /a.sqsh\n"), 4, 9,
         "runtime.kind", "the job needs a slurm block", "submit job.sh with sbatch"),
]

NAMES = [
    case("apptainer-prepend-path", runtime(APPTAINER, "env:\n  PREPEND_PATH: /opt/bin\n"), 8, 3,
         "env.PREPEND_PATH", "apptainer reads it as a change to PATH", "set PATH instead"),
    case("apptainer-home", runtime(APPTAINER, "env:\n  HOME: /home/me\n"), 8, 3, "env.HOME",
         "folder in the run dir that the steps' user can write"),
    case("apptainer-gpus-and-cuda-visible-devices",
         runtime(APPTAINER + "  gpus: [0]\n", "env:\n  CUDA_VISIBLE_DEVICES: '1'\n"), 9, 3,
         "env.CUDA_VISIBLE_DEVICES", "runtime.gpus sets it"),
    case("apptainer-hf-home", runtime(APPTAINER, "secrets: [HF_HOME]\n"), 7, 11, "secrets[0]",
         "set paths.cache_dir instead"),
    case("enroot-home", enroot("  image: /a.sqsh\n", "env:\n  HOME: /home/me\n"), 8, 3,
         "env.HOME", "pyxis and enroot read it on the node", "enroot keeps its configuration"),
    case("enroot-setting", enroot("  image: /a.sqsh\n", "env:\n  ENROOT_CONFIG_PATH: /c\n"), 8,
         3, "env.ENROOT_CONFIG_PATH", "pyxis and enroot read it on the node"),
    case("pyxis-setting", enroot("  image: /a.sqsh\n", "secrets: [PYXIS_CONTAINER_NAME]\n"), 7,
         11, "secrets[0]", "pyxis and enroot read it on the node"),
]

MOUNTED = [
    case("apptainer-run-dir-with-comma", runtime(APPTAINER, "paths: {run_dir: '/runs/a,b'}\n"),
         7, 18, "paths.run_dir", "apptainer splits a mount on ':' and ','"),
    case("enroot-cache-dir-with-colon", enroot("  image: /a.sqsh\n", "paths: {cache_dir: /c:d}\n"),
         7, 20, "paths.cache_dir", "pyxis splits a mount on ':' and ','"),
    case("enroot-run-dir-with-quote", enroot("  image: /a.sqsh\n",
                                             "paths: {run_dir: '/runs/a\"b'}\n"),
         7, 18, "paths.run_dir", "writes each mount into a shell script"),
    case("enroot-mount-with-backtick",
         enroot("  image: /a.sqsh\n  mounts: [{source: '/data/`id`', target: /data}]\n"), 6, 21,
         "runtime.mounts[0].source", "between double quotes", "choose a path without them"),
    case("enroot-mount-target-with-backslash",
         enroot("  image: /a.sqsh\n  mounts: [{source: /data, target: '/da\\ta'}]\n"), 6, 36,
         "runtime.mounts[0].target", "between double quotes"),
    case("apptainer-mount-on-the-run-dir",
         runtime(APPTAINER + "  mounts: [{source: /data, target: /workspace//run/}]\n"), 6, 36,
         "runtime.mounts[0].target", "taken by the job's own mounts"),
]


test_each_bad_runtime_file_is_reported_once_at_the_exact_place = reported_once_test(
    IMAGES + OPTIONS + NAMES + MOUNTED)
