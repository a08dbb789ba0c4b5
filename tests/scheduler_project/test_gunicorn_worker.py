"""The gunicorn worker dates a request from when the kernel received it: a connection that waited
in the listen backlog before it was accepted has waited that long."""

from __future__ import annotations

import socket
import time

from scheduler_project.gunicorn_worker import received_ago


def test_a_connection_accepted_late_says_how_long_ago_its_bytes_arrived() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        client.sendall(b"GET / HTTP/1.1\r\n\r\n")
        time.sleep(0.4)  # in the backlog, not yet accepted
        accepted, _ = listener.accept()
        with client, accepted:
            assert 0.35 <= received_ago(accepted) < 5.0
            accepted.recv(1024)
            client.sendall(b"more")
            time.sleep(0.05)
            assert received_ago(accepted) < 0.35  # a new request is dated anew


def test_a_socket_that_is_not_tcp_has_no_age() -> None:
    left, right = socket.socketpair()
    with left, right:
        assert received_ago(left) == 0.0
