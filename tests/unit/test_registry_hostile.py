"""`obc lock` against hostile registries (issue 18, F13-F15): stub web servers on loopback
(127.0.0.1 is the registry, 127.0.0.2 another host) answering with foreign token realms,
redirects to other hosts, slow, short, oversized or mislabelled bodies, and realms that are
no address at all. obc must talk only to the registry it was given, give up at its deadline,
never lock the digest of bytes it did not fully receive, and never end in a traceback."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.lock.registry import (
    MAX_MANIFEST,
    ResolveError,
    _check_realm,
    parse_reference,
    resolve,
)
from tests.support.engines import wait_until

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}).encode()
MANIFEST_DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
PATH = "/v2/a/manifests/1"
TOKEN = "the-registry-token"
# Generous: only "it ended, and not long after its deadline" is asserted, never how fast.
MARGIN = 20


@dataclass
class Reply:
    """One answer: status, headers, body; `length` announces another Content-Length than the
    body's (none unless `announced`); from byte `paced_from` of the whole answer on, one byte
    every `pace` seconds."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    length: int | str | None = None
    announced: bool = True
    pace: float = 0.0
    paced_from: int | None = None


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Stub:
    """A web server on one loopback address: `replies` by path (404 otherwise), and every
    request it was sent."""

    host: str
    replies: dict[str, Reply | Callable[[Seen], Reply]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.host.rsplit(":", 1)[0]

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://{self.host}{path}"


def _answer(reply: Reply, method: str) -> bytes:
    length = len(reply.body) if reply.length is None else reply.length
    head = [f"HTTP/1.0 {reply.status} Stub", "Connection: close",
            *([f"Content-Length: {length}"] if reply.announced else []),
            *(f"{name}: {value}" for name, value in reply.headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (
        reply.body if method == "GET" else b"")


@contextlib.contextmanager
def serving() -> Iterator[Callable[..., Stub]]:
    """Start stubs on loopback addresses; all stop at the end, slow answers too."""
    stopping = threading.Event()
    servers: list[ThreadingHTTPServer] = []

    def start(address: str = "127.0.0.1") -> Stub:
        stub = Stub("")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = urllib.parse.urlsplit(self.path).path
                stub.seen.append(Seen(self.command, self.path, dict(self.headers.items())))
                reply = stub.replies.get(path, Reply(404))
                reply = reply(stub.seen[-1]) if callable(reply) else reply
                data = _answer(reply, self.command)
                start = len(data) if reply.paced_from is None else reply.paced_from
                self.wfile.write(data[:start])
                for offset in range(start, len(data)):
                    self.wfile.write(data[offset:offset + 1])
                    self.wfile.flush()
                    if stopping.wait(reply.pace):
                        return

            do_HEAD = do_GET

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer((address, 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        stub.host = f"{address}:{server.server_address[1]}"
        return stub

    try:
        yield start
    finally:
        stopping.set()
        for server in servers:
            server.shutdown()
            server.server_close()


@pytest.fixture
def stubs() -> Iterator[Callable[..., Stub]]:
    with serving() as start:
        yield start


def challenge(realm: str) -> Reply:
    return Reply(401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="stub"'})


def token_reply() -> Reply:
    return Reply(body=json.dumps({"token": TOKEN}).encode(),
                 headers={"Content-Type": "application/json"})


def manifest_reply(**headers: str) -> Reply:
    return Reply(body=MANIFEST, headers={"Content-Type": OCI_INDEX, **headers})


def once_authorised(realm: str, reply: Reply) -> Callable[[Seen], Reply]:
    """A registry's answer: a challenge naming `realm`, or with a token, `reply`."""
    return lambda seen: reply if seen.headers.get("Authorization") == f"Bearer {TOKEN}" \
        else challenge(realm)


def redirect(to: str, code: int = 307) -> Reply:
    return Reply(code, {"Location": to})


def lock_run(obc, image: str, *options: str):
    """`obc lock` of one run file using `image`, in the test's folder; the outcome, and how
    long it took."""
    Path("runs").mkdir()
    Path("runs/a.yaml").write_text(f"version: 1\nid: a\nruntime: {{kind: docker, image: {image}}}"
                                   "\nsteps: [{name: s, run: [x]}]\n")
    started = time.monotonic()
    done = obc("lock", "runs", *options)
    return done, time.monotonic() - started


# --- F13: a token realm on another host ------------------------------------------------


def test_a_token_realm_on_another_host_is_refused_and_never_asked(stubs) -> None:
    # The review's: the registry sends obc to an internal address of another host.
    registry, internal = stubs(), stubs("127.0.0.2")
    realm = internal.url("/internal/token")
    registry.replies[PATH] = once_authorised(realm, manifest_reply())
    internal.replies["/internal/token"] = token_reply()
    with pytest.raises(ResolveError, match=f"token service '{realm}' on another host or scheme.*"
                                           f"--allow-realm {internal.name}"):
        resolve(f"{registry.host}/a:1")
    assert internal.seen == []


@pytest.mark.parametrize("realm", ["https://{host}/token", "http://localhost:{port}/token"],
                         ids=["other-scheme", "other-name"])
def test_a_realm_of_another_scheme_or_name_is_refused(stubs, realm: str) -> None:
    registry = stubs()
    realm = realm.format(host=registry.host, port=registry.host.rsplit(":", 1)[1])
    registry.replies[PATH] = once_authorised(realm, manifest_reply())
    registry.replies["/token"] = token_reply()
    with pytest.raises(ResolveError, match="obc lock talks only to the registry it was given"):
        resolve(f"{registry.host}/a:1")
    assert [seen.path for seen in registry.seen] == [PATH]


def test_a_realm_on_another_port_of_the_registry_host_is_asked(stubs) -> None:
    registry, tokens = stubs(), stubs()
    registry.replies[PATH] = once_authorised(tokens.url("/token"), manifest_reply())
    tokens.replies["/token"] = token_reply()
    assert resolve(f"{registry.host}/a:1") == MANIFEST_DIGEST
    assert [seen.path.split("?")[0] for seen in tokens.seen] == ["/token"]


def test_an_allowed_realm_on_another_host_is_asked_without_credentials(stubs) -> None:
    registry, tokens = stubs(), stubs("127.0.0.2")
    registry.replies[PATH] = once_authorised(tokens.url("/token"), manifest_reply())
    tokens.replies["/token"] = token_reply()
    assert resolve(f"{registry.host}/a:1",
                   allowed_realms=frozenset({"127.0.0.2"})) == MANIFEST_DIGEST
    assert len(tokens.seen) == 1 and "Authorization" not in tokens.seen[0].headers


def test_obc_lock_asks_a_foreign_realm_only_when_told_to(obc, stubs, tmp_path,
                                                        monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    registry, tokens = stubs(), stubs("127.0.0.2")
    registry.replies[PATH] = once_authorised(tokens.url("/token"), manifest_reply())
    tokens.replies["/token"] = token_reply()
    done, _ = lock_run(obc, f"{registry.host}/a:1")
    assert done.code == 1 and "allow its host with --allow-realm 127.0.0.2" in done.stderr
    assert tokens.seen == [] and not Path("obc.lock").exists()
    done = obc("lock", "runs", "--allow-realm", "127.0.0.2")
    assert done.code == 0, done
    assert f"{registry.host}/a:1 {MANIFEST_DIGEST}" in Path("obc.lock").read_text()


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf", "soon"])
def test_a_timeout_is_a_number_of_seconds(obc, seconds: str) -> None:
    with pytest.raises(SystemExit) as stop:
        obc("lock", "runs", "--timeout", seconds)
    assert stop.value.code == 2


@pytest.mark.parametrize(("realm", "asked"), [
    ("https://auth.docker.io/token", True),
    ("https://auth.docker.io:8443/token", True),
    ("http://auth.docker.io/token", False),
    ("https://auth.docker.io.example.com/token", False),
    ("https://registry-1.docker.io/token", True),
])
def test_docker_hub_may_send_obc_to_its_own_token_service_only(realm: str, asked: bool) -> None:
    hub = parse_reference("ubuntu:24.04")
    if asked:
        _check_realm(hub, realm, frozenset())
    else:
        with pytest.raises(ResolveError, match="on another host or scheme"):
            _check_realm(hub, realm, frozenset())


@pytest.mark.parametrize("host", ["127.0.0.2:5000", "http://127.0.0.2", "", "a/b"])
def test_an_allowed_realm_is_a_host_name(obc, host: str) -> None:
    with pytest.raises(SystemExit) as stop:
        obc("lock", "runs", "--allow-realm", host)
    assert stop.value.code == 2


# --- F13: redirects to another host ----------------------------------------------------


def test_no_credential_follows_a_redirect_to_another_host(stubs) -> None:
    # The review's: after a 307 to another loopback address the bearer went there too.
    registry, elsewhere = stubs(), stubs("127.0.0.2")
    registry.replies[PATH] = once_authorised(registry.url("/token"),
                                             redirect(elsewhere.url(PATH)))
    registry.replies["/token"] = token_reply()
    elsewhere.replies[PATH] = manifest_reply()
    with pytest.raises(ResolveError, match=f"redirected to '{elsewhere.url(PATH)}', on another "
                                           "host"):
        resolve(f"{registry.host}/a:1")
    assert elsewhere.seen == []


def test_a_token_service_that_redirects_to_another_host_is_not_followed(stubs) -> None:
    registry, elsewhere = stubs(), stubs("127.0.0.2")
    registry.replies[PATH] = once_authorised(registry.url("/token"), manifest_reply())
    registry.replies["/token"] = redirect(elsewhere.url("/token"), 302)
    elsewhere.replies["/token"] = token_reply()
    with pytest.raises(ResolveError, match="on another host"):
        resolve(f"{registry.host}/a:1")
    assert elsewhere.seen == []


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_a_redirect_on_the_registry_host_keeps_the_method_and_the_token(stubs,
                                                                        code: int) -> None:
    registry = stubs()
    registry.replies[PATH] = once_authorised(registry.url("/token"),
                                             redirect("/v2/a/manifests/moved", code))
    registry.replies["/v2/a/manifests/moved"] = once_authorised(registry.url("/token"),
                                                                manifest_reply())
    registry.replies["/token"] = token_reply()
    assert resolve(f"{registry.host}/a:1") == MANIFEST_DIGEST
    moved = registry.seen[-1]
    assert (moved.method, moved.path) == ("GET", "/v2/a/manifests/moved")
    assert moved.headers["Authorization"] == f"Bearer {TOKEN}"
    assert "index.v1+json" in moved.headers["Accept"]


# --- F14: one deadline; a body is whole or an error ------------------------------------


@pytest.mark.parametrize("paced_from", ["body", "headers"])
def test_a_slow_answer_ends_at_the_deadline(obc, stubs, tmp_path, monkeypatch,
                                            paced_from: str) -> None:
    # The review's: 100,000 bytes announced, one sent a second, for longer than any timeout.
    monkeypatch.chdir(tmp_path)
    registry = stubs()
    reply = manifest_reply()
    reply.body, reply.pace = b" " * 100_000, 1.0
    reply.paced_from = len(_answer(reply, "HEAD")) if paced_from == "body" else 10
    registry.replies[PATH] = reply
    done, took = lock_run(obc, f"{registry.host}/a:1", "--timeout", "2")
    assert done.code == 2, done
    assert done.stderr == "obc: error: obc lock did not finish in 2 s (--timeout); nothing " \
                          "was written\n"
    assert took < 2 + MARGIN
    assert not Path("obc.lock").exists()


def test_the_deadline_stops_skopeo_too(obc, tmp_path, monkeypatch) -> None:
    # A skopeo that never answers (it sleeps as itself, so its pid is the one obc kills).
    monkeypatch.chdir(tmp_path)
    programs = tmp_path / "bin"
    programs.mkdir()
    (programs / "skopeo").write_text(f"#!/bin/sh\necho $$ > {tmp_path}/skopeo.pid\n"
                                     "exec sleep 600\n")
    (programs / "skopeo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}:{os.environ['PATH']}")
    done, took = lock_run(obc, "127.0.0.1:5000/a:1", "--skopeo", "--timeout", "2")
    assert (done.code, took < 2 + MARGIN) == (2, True), done
    assert "did not finish in 2 s" in done.stderr
    pid = int((tmp_path / "skopeo.pid").read_text())
    # Killed and reaped: subprocess.run kills its child on any exception, then waits.
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), "obc to kill skopeo", timeout=MARGIN)


def test_a_short_body_is_an_error_not_a_digest(stubs) -> None:
    # The review's: 45 of 100,000 bytes, then the connection closed; obc locked their hash.
    registry = stubs()
    reply = manifest_reply()
    reply.body, reply.length = b" " * 45, 100_000
    registry.replies[PATH] = reply
    with pytest.raises(ResolveError, match="sent 45 of the 100,000 bytes it announced"):
        resolve(f"{registry.host}/a:1")


@pytest.mark.parametrize(("body", "length", "message"), [
    (b"{}", MAX_MANIFEST + 1, f"announced {MAX_MANIFEST + 1:,} bytes; obc reads at most "
                              f"{MAX_MANIFEST:,}"),
    (b"{}", -1, "announced a length of '-1'"),
    (b"{}", "2, 2", "announced a length of '2, 2'"),
])
def test_a_length_obc_cannot_read_to_is_an_error(stubs, body: bytes, length: int | str,
                                                message: str) -> None:
    registry = stubs()
    reply = manifest_reply()
    reply.body, reply.length = body, length
    registry.replies[PATH] = reply
    with pytest.raises(ResolveError, match=message):
        resolve(f"{registry.host}/a:1")


def test_a_body_without_a_length_is_read_up_to_the_limit_only(stubs) -> None:
    registry = stubs()
    registry.replies[PATH] = Reply(body=b" " * (MAX_MANIFEST + 10), announced=False,
                                   headers={"Content-Type": OCI_INDEX})
    with pytest.raises(ResolveError, match=f"sent more than the {MAX_MANIFEST:,} bytes obc "
                                           "reads"):
        resolve(f"{registry.host}/a:1")


@pytest.mark.parametrize(("sent", "accepted"), [
    (MANIFEST_DIGEST, True),
    ("sha256:" + "0" * 64, False),
    ("sha512:" + "0" * 128, False),
])
def test_the_digest_is_that_of_the_bytes_received(stubs, sent: str, accepted: bool) -> None:
    registry = stubs()
    registry.replies[PATH] = manifest_reply(**{"Docker-Content-Digest": sent})
    if accepted:
        assert resolve(f"{registry.host}/a:1") == MANIFEST_DIGEST
    else:
        with pytest.raises(ResolveError, match=f"says its digest is {sent}, but the manifest "
                                               f"it sent is {MANIFEST_DIGEST}"):
            resolve(f"{registry.host}/a:1")


# --- F15: no answer ends in a traceback ------------------------------------------------


def test_a_realm_that_is_no_address_is_a_problem_not_a_traceback(obc, stubs, tmp_path,
                                                                 monkeypatch) -> None:
    # The review's: `[` made urllib raise ValueError (Invalid IPv6 URL) through obc.
    monkeypatch.chdir(tmp_path)
    registry = stubs()
    registry.replies[PATH] = challenge("ftp://x\x1b[2K\x1b[1Aok")
    done, _ = lock_run(obc, f"{registry.host}/a:1")
    assert done.code == 1, done
    assert "names a token service that is not a web address: 'ftp://x\\x1b[2K\\x1b[1Aok'" \
        in done.stderr
    assert "\x1b" not in done.stderr and not Path("obc.lock").exists()


@pytest.mark.parametrize("realm", [
    "http://[::1", "http://127.0.0.1:99999/token", "http://127.0.0.1:0x50/token", "https://",
    "http:///token", "http://127.0.0.1:{port}/to ken\x7f", "http://127.0.0.1:{port}/\x85",
    "http://bad\u00e9/", "",
])
def test_any_realm_gives_a_resolve_error(stubs, realm: str) -> None:
    registry = stubs()
    registry.replies[PATH] = challenge(realm.format(port=registry.host.rsplit(":", 1)[1]))
    with pytest.raises(ResolveError):
        resolve(f"{registry.host}/a:1")


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(realm=st.text(st.characters(exclude_characters='"\r\n', codec="latin-1"), max_size=40),
       prefix=st.sampled_from(["", "http://", "https://", "http://127.0.0.1:{port}",
                               "http://[", "ftp://"]))
def test_any_challenge_gives_a_digest_or_a_resolve_error(realm: str, prefix: str) -> None:
    with serving() as start:
        registry = start()
        registry.replies[PATH] = challenge(
            prefix.format(port=registry.host.rsplit(":", 1)[1]) + realm)
        with contextlib.suppress(ResolveError):  # anything else fails the test
            resolve(f"{registry.host}/a:1")
