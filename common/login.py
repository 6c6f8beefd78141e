"""The one login of every server the driver starts off loopback (/metrics, the web UI): HTTP
basic auth with credentials from the environment (LOADTEST_WEB_USER, LOADTEST_WEB_PASSWORD),
compared in constant time. Loopback needs none; any other address without them is refused before
anything starts. The credentials are never written anywhere."""

from __future__ import annotations

import base64
import hmac
import ipaddress
import os
import socket

USER_ENV, PASSWORD_ENV = "LOADTEST_WEB_USER", "LOADTEST_WEB_PASSWORD"
CHALLENGE = {"WWW-Authenticate": 'Basic realm="loadtest"'}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def credentials() -> tuple[str, str] | None:
    """(user, password) from the environment, or None when either is unset or empty."""
    user, password = os.environ.get(USER_ENV), os.environ.get(PASSWORD_ENV)
    return (user, password) if user and password else None


def login_problem(host: str, what: str) -> str | None:
    """Why `what` may not listen on `host` (None when it may)."""
    if is_loopback(host) or credentials():
        return None
    return (f"{what} on {host} (not loopback) needs a login: set {USER_ENV} and {PASSWORD_ENV} in the "
            "environment, or bind 127.0.0.1")


def authorized(header: str | None, user: str, password: str) -> bool:
    """Whether an Authorization header carries these credentials (constant time)."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return hmac.compare_digest((header or "").encode(), expected.encode())


def bind_error(host: str, port: int) -> OSError | None:
    """Why a server could not listen on host:port, IPv4 or IPv6 (None when it can), tried now,
    before anything starts."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family) as s:
            s.bind((host, port))
    except OSError as exc:
        return exc
    return None
