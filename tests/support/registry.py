"""A real OCI registry on loopback for the tests, and images pushed to it with skopeo.

The registry is Debian's `docker-registry` (distribution 2.8), started on a free port with its
configuration and storage in the test's temporary folder, and stopped at the end. With token
auth it answers 401 and `WWW-Authenticate: Bearer realm=...,service=...,scope=...`, as Docker
Hub and ghcr.io do; the token service is the tests' own, which grants any scope to anyone
(the anonymous flow), signing RS256 tokens with a key and certificate made by openssl.

Images are OCI layouts written here from the busybox root filesystem of tests/support/engines.py and
copied with `skopeo copy` (tests/run installs docker-registry and skopeo).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.engines import wait_until

SERVICE, ISSUER = "obc-test-registry", "obc-test-tokens"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def _require(*programs: str) -> None:
    missing = [p for p in programs if not shutil.which(p)]
    if missing:
        pytest.fail(f"REGISTRY TOOLS MISSING: {', '.join(missing)} not installed, so the image "
                    "lock cannot be tested; tests/run installs them (Debian: docker-registry "
                    "skopeo)")


@dataclass
class TokenService:
    """A bearer-token service on loopback; `seen` holds each request's query and client."""

    url: str
    certificate: Path
    seen: list[dict[str, list[str]]] = field(default_factory=list)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _token(scopes: list[str], key: Path, certificate_der: bytes) -> str:
    """A JWT the registry accepts: signed by `key`, with its certificate in `x5c`."""
    now = int(time.time())
    access = []
    for scope in scopes:
        kind, rest = scope.split(":", 1)
        name, actions = rest.rsplit(":", 1)
        access.append({"type": kind, "name": name, "actions": actions.split(",")})
    header = {"alg": "RS256", "typ": "JWT", "x5c": [base64.b64encode(certificate_der).decode()]}
    claims = {"iss": ISSUER, "sub": "", "aud": SERVICE, "iat": now, "nbf": now - 60,
              "exp": now + 3600, "jti": hashlib.sha256(json.dumps(scopes).encode()).hexdigest(),
              "access": access}
    signed = ".".join(_b64url(json.dumps(part).encode()) for part in (header, claims))
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key)],
                               input=signed.encode(), capture_output=True, check=True).stdout
    return f"{signed}.{_b64url(signature)}"


@pytest.fixture(scope="session")
def token_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenService]:
    """A token service that hands every client a token for whatever scope it asks."""
    _require("openssl")
    folder = tmp_path_factory.mktemp("tokens")
    key, certificate = folder / "key.pem", folder / "certificate.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=obc-test-tokens", "-keyout", str(key),
                    "-out", str(certificate)], capture_output=True, check=True)
    der = ssl.PEM_cert_to_DER_cert(certificate.read_text())
    seen: list[dict[str, list[str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            seen.append({**query, "user-agent": [self.headers.get("User-Agent", "")]})
            token = _token(query.get("scope", []), key, der)
            body = json.dumps({"token": token, "expires_in": 3600}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield TokenService(f"http://127.0.0.1:{server.server_address[1]}/token", certificate,
                           seen)
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Registry:
    """A running registry: `host` is 127.0.0.1:PORT."""

    host: str
    process: subprocess.Popen
    folder: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def push(self, layout: Path, tag: str, *, docker_types: bool = False) -> None:
        """Copy the OCI layout's image (or index, with every image) to `obc/test:TAG`."""
        types = ["--format", "v2s2"] if docker_types else []
        _skopeo("copy", "--all", "--dest-tls-verify=false", *types, f"oci:{layout}:{tag}",
                f"docker://{self.host}/obc/test:{tag}", folder=self.folder)

    def inspect(self, tag: str, *, raw: bool = False) -> dict:
        """What `skopeo inspect` reports for `obc/test:TAG` (the manifest itself with raw)."""
        options = ["--raw"] if raw else []
        return json.loads(_skopeo("inspect", *options, "--tls-verify=false",
                                  f"docker://{self.host}/obc/test:{tag}", folder=self.folder))


def _skopeo(*args: str, folder: Path) -> str:
    # No policy or logins of this machine: the images are the tests' own.
    result = subprocess.run(["skopeo", "--insecure-policy", *args], capture_output=True,
                            text=True, timeout=120, check=False,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(folder),
                                 "REGISTRY_AUTH_FILE": str(folder / "auth.json")})
    if result.returncode != 0:
        pytest.fail(f"skopeo {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


StartRegistry = Callable[..., Registry]


@pytest.fixture
def start_registry(tmp_path: Path, token_service: TokenService) -> Iterator[StartRegistry]:
    """Start registries with auth "token" (the default), "none" or "basic" (a login, which
    the anonymous flow cannot give); all are stopped at the end of the test."""
    _require("docker-registry", "skopeo")
    started: list[Registry] = []

    def start(auth: str = "token") -> Registry:
        folder = tmp_path / f"registry-{len(started)}"
        folder.mkdir()
        started.append(_start(folder, auth, token_service))
        return started[-1]

    yield start
    for registry in started:
        registry.stop()


def _start(folder: Path, auth: str, tokens: TokenService) -> Registry:
    config = {"version": "0.1", "log": {"level": "info", "accesslog": {"disabled": True}},
              "storage": {"filesystem": {"rootdirectory": str(folder / "data")}},
              "http": {"addr": "127.0.0.1:0", "secret": "obc-test"}}
    if auth == "token":
        config["auth"] = {"token": {"realm": tokens.url, "service": SERVICE, "issuer": ISSUER,
                                    "rootcertbundle": str(tokens.certificate)}}
    elif auth == "basic":
        (folder / "htpasswd").write_text("")
        config["auth"] = {"htpasswd": {"realm": "obc-test", "path": str(folder / "htpasswd")}}
    (folder / "config.yml").write_text(json.dumps(config))  # JSON is YAML
    log = folder / "registry.log"
    with open(log, "wb") as stream:
        process = subprocess.Popen(["docker-registry", "serve", str(folder / "config.yml")],
                                   stdin=subprocess.DEVNULL, stdout=stream,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    listening = re.compile(r"listening on (127\.0\.0\.1:\d+)")

    def ready() -> bool:
        if process.poll() is not None:
            pytest.fail(f"docker-registry exited:\n{log.read_text()[-3000:]}")
        return listening.search(log.read_text()) is not None

    wait_until(ready, "docker-registry to listen")
    return Registry(listening.search(log.read_text())[1], process, folder)


def write_oci_layout(folder: Path, tag: str, rootfs: bytes, *, variant: str = "1",
                     platforms: tuple[str, ...] = ("amd64",)) -> Path:
    """An OCI layout holding one image of `rootfs` as `tag`, or an index of one image per
    platform; `variant` (a config label) makes a different image of the same files."""
    blobs = folder / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)

    def blob(data: bytes, media_type: str) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    layer = blob(rootfs, "application/vnd.oci.image.layer.v1.tar")

    def image(architecture: str) -> dict:
        # The platform is a label only: these images are resolved and pulled, never run
        # anywhere but on this machine's architecture.
        config = {"architecture": architecture, "os": "linux",
                  "config": {"Labels": {"obc.test.variant": variant}},
                  "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [layer],
                    "config": blob(json.dumps(config).encode(),
                                   "application/vnd.oci.image.config.v1+json")}
        return {**blob(json.dumps(manifest).encode(), OCI_MANIFEST),
                "platform": {"architecture": architecture, "os": "linux"}}

    images = [image(architecture) for architecture in platforms]
    top = images[0] if len(images) == 1 else blob(json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": images}).encode(), OCI_INDEX)
    top = {**top, "annotations": {"org.opencontainers.image.ref.name": tag}}
    (folder / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    (folder / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    return folder
