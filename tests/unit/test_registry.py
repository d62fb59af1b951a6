"""registry.py and lockfile.py on their own: docker's reading of image names, the answers of
registries that tests/support/registry.py's real one never gives, and hand-edited lock files."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compiler.lock.registry import Reference, ResolveError, parse_reference, resolve
from compiler.read.lockfile import format_lock, read_lock

DIGEST = "sha256:" + "0" * 64


@pytest.mark.parametrize(("image", "reference", "url"), [
    ("ubuntu", Reference("docker.io", "library/ubuntu", "latest"),
     "https://registry-1.docker.io/v2/library/ubuntu/manifests/latest"),
    ("docker.io/ubuntu:24.04", Reference("docker.io", "library/ubuntu", "24.04"),
     "https://registry-1.docker.io/v2/library/ubuntu/manifests/24.04"),
    ("index.docker.io/team/image:1", Reference("docker.io", "team/image", "1"),
     "https://registry-1.docker.io/v2/team/image/manifests/1"),
    ("axolotlai/axolotl:main-latest", Reference("docker.io", "axolotlai/axolotl", "main-latest"),
     "https://registry-1.docker.io/v2/axolotlai/axolotl/manifests/main-latest"),
    ("ghcr.io/org/team/image:v2", Reference("ghcr.io", "org/team/image", "v2"),
     "https://ghcr.io/v2/org/team/image/manifests/v2"),
    ("registry:5000/image", Reference("registry:5000", "image", "latest"),
     "https://registry:5000/v2/image/manifests/latest"),
    ("localhost/image:1", Reference("localhost", "image", "1"),
     "http://localhost/v2/image/manifests/1"),
    ("localhost:5000/a/b:c", Reference("localhost:5000", "a/b", "c"),
     "http://localhost:5000/v2/a/b/manifests/c"),
    ("127.0.0.2:5000/a:1", Reference("127.0.0.2:5000", "a", "1"),
     "http://127.0.0.2:5000/v2/a/manifests/1"),
    ("10.0.0.1:5000/a:1", Reference("10.0.0.1:5000", "a", "1"),
     "https://10.0.0.1:5000/v2/a/manifests/1"),
])
def test_images_are_read_as_docker_reads_them(image: str, reference: Reference, url: str):
    assert parse_reference(image) == reference
    assert reference.manifest_url == url


@dataclass
class Answer:
    """What the fake registry sends for every request: status, headers, body."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@pytest.fixture
def answer() -> Iterator[tuple[Answer, str]]:
    """A web server on loopback that answers every request alike; what, and its host."""
    fake = Answer()

    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(fake.status)
            for name, value in {**fake.headers,
                                "Content-Length": str(len(fake.body))}.items():
                self.send_header(name, value)
            self.end_headers()

        def do_GET(self) -> None:
            self.do_HEAD()
            self.wfile.write(fake.body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield fake, f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_without_a_digest_header_the_digest_is_that_of_the_manifest_bytes(answer):
    fake, host = answer
    fake.body = b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json"}'
    fake.headers = {"Content-Type": "application/vnd.oci.image.index.v1+json"}
    assert resolve(f"{host}/a:1") == "sha256:" + hashlib.sha256(fake.body).hexdigest()


def test_a_manifest_of_an_old_type_cannot_be_pinned(answer):
    fake, host = answer
    fake.headers = {"Content-Type": "application/vnd.docker.distribution.manifest.v1+prettyjws"}
    with pytest.raises(ResolveError, match="of type application/vnd.docker.distribution."
                                           "manifest.v1\\+prettyjws, which obc cannot pin"):
        resolve(f"{host}/a:1")


def test_a_token_service_must_be_a_web_address(answer):
    fake, host = answer
    fake.status = 401
    fake.headers = {"WWW-Authenticate": 'Bearer realm="file:///etc/passwd",service="x"'}
    with pytest.raises(ResolveError, match="names a token service that is not a web address"):
        resolve(f"{host}/a:1")


@pytest.mark.parametrize(("text", "line", "message"), [
    (f"a:1 {DIGEST}\na:1 {DIGEST}\n", 2, "a:1: listed twice (line 1)"),
    (f"a:1@{DIGEST} {DIGEST}\n", 1, f"'a:1@{DIGEST}' is pinned by digest already; a pinned "
                                    "image needs no entry"),
    ("a:1 sha256:ABC\n", 1, "expected 'IMAGE sha256:<64 lower-case hex digits>', one space "
                            "between them, got 'a:1 sha256:ABC'"),
    (f"# a comment\n\na:1  {DIGEST}\n", 3, "expected 'IMAGE sha256:<64 lower-case hex "
                                          f"digits>', one space between them, got 'a:1  "
                                          f"{DIGEST}'"),
])
def test_a_hand_edited_lock_is_read_strictly(tmp_path: Path, text: str, line: int,
                                             message: str) -> None:
    path = tmp_path / "obc.lock"
    path.write_text(text)
    _, (problem,) = read_lock(path)
    assert problem.text() == f"{path}:{line}:1: error: {message}"


def test_a_lock_reads_back_what_was_written(tmp_path: Path) -> None:
    digests = {"b:1": DIGEST, "a:2": "sha256:" + "f" * 64}
    path = tmp_path / "obc.lock"
    path.write_text(format_lock(digests))
    lock, problems = read_lock(path)
    assert (lock.digests, problems) == (digests, [])
    assert list(lock.digests) == ["a:2", "b:1"]
