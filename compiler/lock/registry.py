"""Image tag → digest, from the registry: the only part of obc that uses the network.

`resolve` speaks the OCI distribution API with the anonymous bearer-token flow (Docker Hub,
ghcr.io, quay.io), to the registry's host only, and hashes the manifest bytes it received
whole; `resolve_with_skopeo` asks `skopeo inspect`, which uses your registry logins. Both
return the digest `docker pull` pins: the index (manifest list) for a multi-platform image,
else the image manifest. `deadline` bounds a whole run of either.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import ipaddress
import json
import re
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from typing import Any

from ..core.diagnostics import ObcError
from ..core.text import quoted
from ..model.runtimes import registry_host

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
# Registries whose token service is on another host, known to obc: only Docker Hub's.
KNOWN_REALMS = {DOCKER_HUB_API: "auth.docker.io"}
ONLY_THE_REGISTRY = "obc lock talks only to the registry it was given"
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


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise ObcError once `seconds` have passed, whatever obc then waits for: an answer
    that trickles in a byte at a time outlasts every per-request timeout. Main thread only
    (a signal)."""

    def expire(_signum: int, _frame: object) -> None:
        raise ObcError(f"obc lock did not finish in {seconds:g} s (--timeout); nothing was "
                       "written")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def resolve(image: str, allowed_realms: frozenset[str] = frozenset()) -> str:
    """Return the digest of the manifest the registry serves for the tag `image`, computed
    over the bytes received. `allowed_realms`: hosts besides the registry's own (and Docker
    Hub's auth.docker.io) whose token service may be asked (--allow-realm)."""
    reference = parse_reference(image)
    headers, body = _fetch(reference, allowed_realms)
    media_type = headers.get_content_type() if headers.get("Content-Type") else "(none)"
    if media_type not in MANIFEST_TYPES:
        raise ResolveError(f"the registry sent a manifest of type {media_type}, which obc "
                           "cannot pin; expected an OCI or Docker v2 manifest or index")
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    said = headers.get("Docker-Content-Digest")
    if said is not None and said != digest:
        raise ResolveError(f"the registry says its digest is {said}, but the manifest it sent "
                           f"is {digest}")
    return digest


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


def _fetch(reference: Reference, allowed_realms: frozenset[str]) -> tuple[Message, bytes]:
    """GET the tag's manifest, answering a bearer challenge with an anonymous token."""
    request = urllib.request.Request(reference.manifest_url,
                                     headers={"Accept": ", ".join(MANIFEST_TYPES)})
    try:
        return _open(request)
    except urllib.error.HTTPError as error:
        if error.code != 401:
            raise ResolveError(_refusal(error)) from error
        challenge = error.headers.get("WWW-Authenticate", "")
    token = _anonymous_token(reference, challenge, allowed_realms)
    request.add_header("Authorization", f"Bearer {token}")
    try:
        return _open(request)
    except urllib.error.HTTPError as error:
        raise ResolveError(_refusal(error, after_token=True)) from error


def _site(url: str) -> tuple[str, str]:
    """Return the scheme and host name of a web address; raise ResolveError if it is none."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as error:
        raise ResolveError(f"{quoted(url)} is not a web address: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ResolveError(f"{quoted(url)} is not a web address")
    return parts.scheme, parts.hostname


class _SameSite(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only on the host (and scheme) of the request, as the same method
    with the same headers; a redirect elsewhere is refused, so no token travels there."""

    def redirect_request(  # noqa: PLR0913, PLR0917 -- urllib's signature
            self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Message,
            newurl: str) -> urllib.request.Request:
        fp.close()  # the redirect's own body is never read
        if _site(newurl) != _site(req.full_url):
            raise ResolveError(f"{_host(req.full_url)} redirected to {quoted(newurl)}, on another "
                               f"host; {ONLY_THE_REGISTRY}")
        return urllib.request.Request(newurl, headers=dict(req.header_items()),
                                      method=req.get_method())


def _open(request: urllib.request.Request) -> tuple[Message, bytes]:
    """Send `request`; return the headers and the whole body, of at most MAX_MANIFEST bytes.

    Raises HTTPError for an HTTP error status, ResolveError for anything else.
    """
    host = _host(request.full_url)
    # A proxy set for the outside world must not see a loopback registry (docker bypasses it).
    proxies = {} if is_loopback(host) else None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies), _SameSite)
    try:
        with opener.open(request, timeout=TIMEOUT) as response:
            return response.headers, _body(response, host)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
        raise ResolveError(f"cannot reach {host}: {getattr(error, 'reason', error)}") from error


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc


def _body(response: http.client.HTTPResponse, host: str) -> bytes:
    """Return the body as announced: a short one (the connection closed early), a longer one
    than obc reads, or an announced length that is not a number is an error."""
    announced = response.headers.get("Content-Length")
    if announced is not None and not announced.isdigit():
        raise ResolveError(f"{host} announced a length of {quoted(announced)}")
    if announced is not None and int(announced) > MAX_MANIFEST:
        raise ResolveError(f"{host} announced {int(announced):,} bytes; obc reads at most "
                           f"{MAX_MANIFEST:,}")
    body = response.read(MAX_MANIFEST + 1)
    if len(body) > MAX_MANIFEST:
        raise ResolveError(f"{host} sent more than the {MAX_MANIFEST:,} bytes obc reads")
    if announced is not None and len(body) != int(announced):
        raise ResolveError(f"{host} sent {len(body):,} of the {int(announced):,} bytes it "
                           "announced")
    return body


def _anonymous_token(reference: Reference, challenge: str,
                     allowed_realms: frozenset[str]) -> str:
    """Ask the challenge's token service, if obc may, for an anonymous pull token."""
    scheme, _, parameters = challenge.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise ResolveError(f"{reference.registry} asks for a login ({scheme or 'no'} "
                           "challenge); obc lock uses anonymous tokens only: log in and use "
                           "obc lock --skopeo, or pin the digest in the run file")
    values = dict(_CHALLENGE_PARAM.findall(parameters))
    if "realm" not in values:
        raise ResolveError(f"{reference.registry} sent a bearer challenge without a realm")
    realm = values["realm"]
    _check_realm(reference, realm, allowed_realms)
    query = {"service": values.get("service"),
             "scope": values.get("scope", f"repository:{reference.repository}:pull")}
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


def _check_realm(reference: Reference, realm: str, allowed_realms: frozenset[str]) -> None:
    """A token service is asked only on the registry's own scheme and host, or over HTTPS (or
    HTTP on loopback) on a host of KNOWN_REALMS or --allow-realm: a registry cannot send obc
    anywhere else."""
    try:
        scheme, host = _site(realm)
    except ResolveError as error:
        raise ResolveError(f"{reference.registry} names a token service that is not a web "
                           f"address: {quoted(realm)}") from error
    registry = _site(reference.manifest_url)
    allowed = host in allowed_realms or KNOWN_REALMS.get(registry[1]) == host
    if (scheme, host) == registry or allowed and (scheme == "https" or is_loopback(host)):
        return
    raise ResolveError(f"{reference.registry} names the token service {quoted(realm)} on another "
                       f"host or scheme; {ONLY_THE_REGISTRY}: if that service is the "
                       f"registry's own, allow its host with --allow-realm {host}")


def _refusal(error: urllib.error.HTTPError, *, after_token: bool = False) -> str:
    if error.code == 404:
        return "no such repository or tag in the registry (404 Not Found)"
    if error.code == 401 and after_token:
        return ("the registry refused anonymous access (401 Unauthorized): the repository is "
                "private or does not exist; for a private one, log in and use obc lock "
                "--skopeo, or pin the digest in the run file")
    return f"the registry answered {error.code} {error.reason}"
