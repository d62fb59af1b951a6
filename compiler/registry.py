"""Image tag → digest, from the registry: the only part of obc that uses the network.

`resolve` speaks the OCI distribution API with the anonymous bearer-token flow (Docker Hub,
ghcr.io, quay.io); `resolve_with_skopeo` asks `skopeo inspect`, which uses your registry
logins. Both return the digest `docker pull` pins: the index (manifest list) for a multi-
platform image, else the image manifest.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.message import Message

from .runtimes import DIGEST, registry_host

# A registry serves a tag only in a type the client accepts (distribution answers 404 for an
# index otherwise; others send one platform's manifest): accepting the index types makes a
# multi-platform tag resolve to its index, which is what docker pulls and pins.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DOCKER_HUB, DOCKER_HUB_API = "docker.io", "registry-1.docker.io"
TIMEOUT = 30  # seconds, for each request
MAX_MANIFEST = 4 * 1024 * 1024  # the size registries accept for a manifest (OCI spec)
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class ResolveError(Exception):
    """An image whose digest cannot be had; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class Reference:
    """An image reference as docker reads it: `ubuntu` is docker.io/library/ubuntu:latest."""

    registry: str
    repository: str
    tag: str

    @property
    def is_loopback(self) -> bool:
        return is_loopback(self.registry)

    @property
    def manifest_url(self) -> str:
        # docker treats loopback registries as insecure (plain HTTP); everything else is HTTPS
        # with certificate checks.
        scheme = "http" if self.is_loopback else "https"
        host = DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry
        return f"{scheme}://{host}/v2/{self.repository}/manifests/{self.tag}"


def is_loopback(host: str) -> bool:
    """Whether `host` (with or without a port) is this machine: localhost or 127.0.0.0/8."""
    name = host.rsplit(":", 1)[0]
    try:
        return name == "localhost" or ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def parse_reference(image: str) -> Reference:
    """Split a tag reference (no digest) the way docker does, with its defaults."""
    name, tag = image, "latest"
    if ":" in image.rsplit("/", 1)[-1]:
        name, tag = image.rsplit(":", 1)
    host = registry_host(name)
    registry, repository = (host, name.partition("/")[2]) if host else (DOCKER_HUB, name)
    if registry in (DOCKER_HUB, "index.docker.io"):
        registry = DOCKER_HUB
        repository = repository if "/" in repository else f"library/{repository}"
    return Reference(registry, repository, tag)


def resolve(image: str) -> str:
    """Return the digest the registry serves for the tag `image`."""
    reference = parse_reference(image)
    headers, _ = _fetch(reference, "HEAD")
    digest = headers.get("Docker-Content-Digest", "")
    if DIGEST.fullmatch(digest):
        return digest
    # The digest header is optional: without it, the digest is that of the manifest's bytes.
    headers, body = _fetch(reference, "GET")
    media_type = headers.get_content_type() if headers.get("Content-Type") else "(none)"
    if media_type not in MANIFEST_TYPES:
        raise ResolveError(f"the registry sent a manifest of type {media_type}, which obc "
                           "cannot pin; expected an OCI or Docker v2 manifest or index")
    if len(body) > MAX_MANIFEST:
        raise ResolveError(f"the registry sent a manifest of more than {MAX_MANIFEST} bytes")
    return "sha256:" + hashlib.sha256(body).hexdigest()


def resolve_with_skopeo(image: str) -> str:
    """Return the digest of the manifest `skopeo inspect --raw` fetches for `image`."""
    reference = parse_reference(image)
    command = ["skopeo", "inspect", "--raw", "--no-tags",
               f"--tls-verify={str(not reference.is_loopback).lower()}", f"docker://{image}"]
    try:
        done = subprocess.run(command, capture_output=True, timeout=TIMEOUT * 4, check=False)
    except FileNotFoundError as error:
        raise ResolveError("skopeo is not installed") from error
    except subprocess.TimeoutExpired as error:
        raise ResolveError(f"skopeo gave no answer in {error.timeout:.0f} s") from error
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise ResolveError(f"skopeo inspect failed: {lines[-1]}")
    return "sha256:" + hashlib.sha256(done.stdout).hexdigest()


def _fetch(reference: Reference, method: str) -> tuple[Message, bytes]:
    """Request the tag's manifest, answering a bearer challenge with an anonymous token."""
    request = urllib.request.Request(reference.manifest_url, method=method,
                                     headers={"Accept": ", ".join(MANIFEST_TYPES)})
    try:
        return _open(request)
    except urllib.error.HTTPError as error:
        if error.code != 401:
            raise ResolveError(_refusal(error)) from error
        challenge = error.headers.get("WWW-Authenticate", "")
    request.add_header("Authorization", f"Bearer {_anonymous_token(reference, challenge)}")
    try:
        return _open(request)
    except urllib.error.HTTPError as error:
        raise ResolveError(_refusal(error, after_token=True)) from error


def _open(request: urllib.request.Request) -> tuple[Message, bytes]:
    """Send `request`; return the headers and at most MAX_MANIFEST + 1 bytes of the body.

    Raises HTTPError for an HTTP error status, ResolveError when there is no answer.
    """
    host = urllib.parse.urlsplit(request.full_url).netloc
    # A proxy set for the outside world must not see a loopback registry (docker bypasses it).
    proxies = {} if is_loopback(host) else None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))
    try:
        with opener.open(request, timeout=TIMEOUT) as response:
            return response.headers, response.read(MAX_MANIFEST + 1)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as error:
        raise ResolveError(f"cannot reach {host}: {getattr(error, 'reason', error)}") from error


def _anonymous_token(reference: Reference, challenge: str) -> str:
    """Ask the challenge's token service for an anonymous pull token."""
    scheme, _, parameters = challenge.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise ResolveError(f"{reference.registry} asks for a login ({scheme or 'no'} "
                           "challenge); obc lock uses anonymous tokens only: log in and use "
                           "obc lock --skopeo, or pin the digest in the run file")
    values = dict(_CHALLENGE_PARAM.findall(parameters))
    if "realm" not in values:
        raise ResolveError(f"{reference.registry} sent a bearer challenge without a realm")
    query = {"service": values.get("service"),
             "scope": values.get("scope", f"repository:{reference.repository}:pull")}
    realm = values["realm"]
    if urllib.parse.urlsplit(realm).scheme not in ("https", "http"):
        raise ResolveError(f"{reference.registry} names a token service that is not a web "
                           f"address: {realm}")
    url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(
        {key: value for key, value in query.items() if value})
    try:
        answer = json.loads(_open(urllib.request.Request(url))[1])
    except urllib.error.HTTPError as error:
        raise ResolveError(f"the token service {realm} refused an anonymous token: "
                           f"{error.code} {error.reason}") from error
    except ValueError as error:
        raise ResolveError(f"the token service {realm} sent no JSON: {error}") from error
    # Docker Hub sends both names; the distribution spec names the second one too.
    token = (answer.get("token") or answer.get("access_token")) if isinstance(answer, dict) \
        else None
    if not isinstance(token, str) or not token:
        raise ResolveError(f"the token service {realm} sent no token")
    return token


def _refusal(error: urllib.error.HTTPError, *, after_token: bool = False) -> str:
    if error.code == 404:
        return "no such repository or tag in the registry (404 Not Found)"
    if error.code == 401 and after_token:
        return ("the registry refused anonymous access (401 Unauthorized): the repository is "
                "private or does not exist; for a private one, log in and use obc lock "
                "--skopeo, or pin the digest in the run file")
    return f"the registry answered {error.code} {error.reason}"
