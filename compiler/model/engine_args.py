"""What `docker run` and `podman run` accept before the image, and how they read it.

Both are cobra programs whose options pflag reads. obc reads a run file's engine options by
pflag's rules against the engine's own option table, and hands them on as whole words
(`--name` or `--name=value`): no word the job passes can then take the next one, the image,
as its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from ..core.text import quoted


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True, slots=True)
class OptionTable:
    """The options of one engine's `run`, as its `run --help` lists them."""

    source: str
    # Options that take a value: `--name=value`, or the next word.
    valued: frozenset[str]
    # pflag booleans: `--name` alone, or `--name=value`; never the next word.
    flags: frozenset[str]
    # One-letter names and the options they stand for.
    shorthands: Mapping[str, str]


# The tables were read from `podman run --help` (podman 4.3.1) and `docker run --help` (docker
# 28.2.2, without a daemon: with one, it hides the options the daemon lacks but still reads
# them). tests/engines/test_engine_table.py checks them against the engines installed, and asks each
# engine whether each option takes a value. An option a newer engine added is refused until
# it is added here; so are hidden options and aliases (podman's --net: write --network).
_PODMAN_VALUED = _names("""
add-host annotation arch attach authfile blkio-weight blkio-weight-device cap-add cap-drop
cgroup-conf cgroup-parent cgroupns cgroups chrootdirs cidfile conmon-pidfile cpu-period
cpu-quota cpu-rt-period cpu-rt-runtime cpu-shares cpus cpuset-cpus cpuset-mems detach-keys
device device-cgroup-rule device-read-bps device-read-iops device-write-bps
device-write-iops dns dns-option dns-search entrypoint env env-file env-merge expose gidmap
group-add health-cmd health-interval health-on-failure health-retries health-start-period
health-timeout hostname hostuser image-volume init-path ip ip6 ipc label label-file
log-driver log-opt mac-address memory memory-reservation memory-swap memory-swappiness mount
name network network-alias oom-score-adj os passwd-entry personality pid pidfile pids-limit
platform pod pod-id-file preserve-fds publish pull requires restart sdnotify seccomp-policy
secret security-opt shm-size stop-signal stop-timeout subgidname subuidname sysctl systemd
timeout tmpfs tz uidmap ulimit umask unsetenv user userns uts variant volume volumes-from
workdir
""")
_PODMAN_FLAGS = _names("""
detach disable-content-trust env-host help http-proxy init interactive no-healthcheck
no-hosts oom-kill-disable passwd privileged publish-all quiet read-only read-only-tmpfs
replace rm rmi rootfs sig-proxy tls-verify tty unsetenv-all
""")
_DOCKER_VALUED = _names("""
add-host annotation attach blkio-weight blkio-weight-device cap-add cap-drop cgroup-parent
cgroupns cidfile cpu-count cpu-percent cpu-period cpu-quota cpu-rt-period cpu-rt-runtime
cpu-shares cpus cpuset-cpus cpuset-mems detach-keys device device-cgroup-rule
device-read-bps device-read-iops device-write-bps device-write-iops dns dns-option
dns-search domainname entrypoint env env-file expose gpus group-add health-cmd
health-interval health-retries health-start-interval health-start-period health-timeout
hostname io-maxbandwidth io-maxiops ip ip6 ipc isolation kernel-memory label label-file link
link-local-ip log-driver log-opt mac-address memory memory-reservation memory-swap
memory-swappiness mount name network network-alias oom-score-adj pid pids-limit platform
publish pull restart runtime security-opt shm-size stop-signal stop-timeout storage-opt
sysctl tmpfs ulimit user userns uts volume volume-driver volumes-from workdir
""")
_DOCKER_FLAGS = _names("""
detach disable-content-trust help init interactive no-healthcheck oom-kill-disable
privileged publish-all quiet read-only rm sig-proxy tty use-api-socket
""")
# The two engines give the same letters.
_SHORTHANDS = {"P": "publish-all", "a": "attach", "c": "cpu-shares", "d": "detach", "e": "env",
               "h": "hostname", "i": "interactive", "l": "label", "m": "memory", "p": "publish",
               "q": "quiet", "t": "tty", "u": "user", "v": "volume", "w": "workdir"}
TABLES = {
    "podman": OptionTable("podman 4.3.1", _PODMAN_VALUED, _PODMAN_FLAGS, _SHORTHANDS),
    "docker": OptionTable("docker 28.2.2", _DOCKER_VALUED, _DOCKER_FLAGS, _SHORTHANDS),
}
# What pflag reads as true and false (Go's strconv.ParseBool).
TRUE = ("1", "t", "T", "true", "TRUE", "True")
FALSE = ("0", "f", "F", "false", "FALSE", "False")


@dataclass(frozen=True, slots=True)
class Option:
    """One engine option: its long name, and its value (None: a flag given alone)."""

    name: str
    value: str | None

    @property
    def word(self) -> str:
        """The option as one whole word, which the engine reads exactly as it was meant."""
        return f"--{self.name}" if self.value is None else f"--{self.name}={self.value}"


class OptionError(ValueError):
    """A word the engine would not read as whole options of its `run`."""


def read_options(engine: str, word: str) -> tuple[Option, ...]:
    """Read one run file word as the engine would: a long option, or a group of shorthands
    (`-it` is -i and -t, `-lfoo` and `-l=foo` are -l with the value foo)."""
    table = TABLES[engine]
    if word == "--":
        raise OptionError("'--' ends the engine's options; obc gives it itself, before the "
                          "image")
    if word.startswith("--"):
        return (_long_option(table, engine, word),)
    if word.startswith("-") and len(word) > 1:
        return tuple(_shorthands(table, engine, word[1:]))
    raise OptionError(f"{quoted(word)} is not an option: the engine would read it as the image")


def normal_words(engine: str, words: Iterable[str]) -> tuple[str, ...]:
    """The run file's engine options as the job passes them: one whole option per word."""
    return tuple(option.word for word in words for option in read_options(engine, word))


def passed_words(engine: object, word: str) -> tuple[str, ...]:
    """The words the job passes for one run file word, which Linux's limits apply to: its
    whole options, or the word itself where it is not one an engine reads (a rule says so)."""
    if not isinstance(engine, str) or engine not in TABLES:
        return (word,)
    try:
        return normal_words(engine, [word])
    except OptionError:
        return (word,)


def _long_option(table: OptionTable, engine: str, word: str) -> Option:
    name, equals, value = word[2:].partition("=")
    if name not in table.valued | table.flags:
        raise OptionError(f"--{name} is not an option of {engine} run ({table.source})")
    return _checked(table, name, value if equals else None, word)


def _shorthands(table: OptionTable, engine: str, group: str) -> Iterator[Option]:
    """pflag's reading of `-group`: each letter is an option until one takes a value, which
    is the rest of the group; `-x=value` gives any option, a flag too, the value after '=',
    but a lone '=' is a value itself (`-l=` gives -l the value '=')."""
    while group:
        letter, rest = group[0], group[1:]
        if letter not in table.shorthands:
            raise OptionError(f"-{letter} is not an option of {engine} run ({table.source})")
        name = table.shorthands[letter]
        if len(rest) > 1 and rest[0] == "=":
            yield _checked(table, name, rest[1:], f"-{letter}")
            return
        if name in table.flags:
            yield Option(name, None)
            group = rest
            continue
        yield _checked(table, name, rest or None, f"-{letter}")
        return


def _checked(table: OptionTable, name: str, value: str | None, written: str) -> Option:
    if name in table.valued and value is None:
        raise OptionError(f"{written} takes a value, which the engine would take from the next "
                          f"word, the image; give it in the same word: --{name}=VALUE")
    if name in table.flags and value is not None and value not in TRUE + FALSE:
        raise OptionError(f"{written}: --{name} takes true or false after '=', not {quoted(value)}")
    return Option(name, value)
