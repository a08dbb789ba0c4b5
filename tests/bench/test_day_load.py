"""bench day's load generator is the balancer and the client's retry: a refused connection goes to
the other server, a request safe to send twice whose answer was reset or cut is sent once more to
the other server, any other never twice; each request with no answer says why; and every create
carries a dedup key of its own, which makes it safe to send twice (the API's tests hold a
repeated key to one task)."""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench import day_load
from bench.day_load import CUT, REFUSED, RESET, TIMEOUT_, failure, send_balanced


@contextmanager
def answering(answer: bytes) -> Iterator[int]:
    """A port whose server reads each request, sends `answer` and closes the connection."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.recv(65536)
            conn.sendall(answer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def closing_server() -> Iterator[int]:
    """Closes each connection without a byte."""
    with answering(b"") as port:
        yield port


@pytest.fixture
def cutting_server() -> Iterator[int]:
    """Answers a status line and half of the body it announced, then closes: a process killed
    mid-answer."""
    with answering(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 50) as port:
        yield port


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_connection_closed_before_any_answer_is_a_reset(closing_server) -> None:
    with pytest.raises(Exception) as raised:
        day_load._send(closing_server, "token", "GET", "/api/v1/tasks", None)
    assert failure(raised.value) == RESET


def test_an_answer_cut_after_its_status_line_is_cut_not_a_reset(cutting_server) -> None:
    with pytest.raises(Exception) as raised:
        day_load._send(cutting_server, "token", "GET", "/api/v1/tasks", None)
    assert failure(raised.value) == CUT


def test_a_cut_answer_is_sent_again_only_when_safe_twice() -> None:
    called, send = sender({1: day_load.AnswerCut(200), 2: 200})
    assert send_balanced([1, 2], 0, True, send) == (200, None, "", True)
    assert called == [1, 2]
    called, send = sender({1: day_load.AnswerCut(201), 2: 201})
    assert send_balanced([1, 2], 0, False, send) == (0, None, CUT, False)
    assert called == [1]


def test_a_refused_connection_is_refused() -> None:
    with pytest.raises(Exception) as raised:
        day_load._send(unused_port(), "token", "GET", "/api/v1/tasks", None)
    assert failure(raised.value) == REFUSED


def sender(outcomes: dict[int, Exception | int]) -> tuple[list[int], object]:
    """A `send` that answers or raises per port, and the ports it was called with."""
    called: list[int] = []

    def send(port: int) -> tuple[int, str | None]:
        called.append(port)
        outcome = outcomes[port]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome, None

    return called, send


def test_a_read_reset_before_any_answer_is_retried_once_on_the_other_server() -> None:
    called, send = sender({1: http.client.RemoteDisconnected("closed"), 2: 200})
    assert send_balanced([1, 2], 0, True, send) == (200, None, "", True)
    assert called == [1, 2]


def test_a_read_reset_on_both_servers_is_sent_twice_only() -> None:
    called, send = sender({1: ConnectionResetError(), 2: ConnectionResetError()})
    assert send_balanced([1, 2], 0, True, send) == (0, None, RESET, True)
    assert called == [1, 2]


def test_a_reset_not_safe_twice_is_not_sent_again() -> None:
    called, send = sender({1: ConnectionResetError(), 2: 201})
    assert send_balanced([1, 2], 0, False, send) == (0, None, RESET, False)
    assert called == [1]


def test_a_refused_create_goes_to_the_other_server() -> None:
    called, send = sender({1: ConnectionRefusedError(), 2: 201})
    assert send_balanced([1, 2], 0, False, send) == (201, None, "", False)
    assert called == [1, 2]


def test_refused_everywhere_and_timed_out_say_so() -> None:
    _, send = sender({1: ConnectionRefusedError(), 2: ConnectionRefusedError()})
    assert send_balanced([1, 2], 1, True, send)[2] == REFUSED
    _, send = sender({1: TimeoutError(), 2: 200})
    assert send_balanced([1, 2], 0, True, send) == (0, None, TIMEOUT_, False)


def test_each_create_carries_its_own_dedup_key_and_sends_it_again_unchanged() -> None:
    ctx = {"seed": 5, "task_ids": ["t"], "run_ids": ["r"], "pages": 1}
    bodies = [day_load._request("create", random.Random(1), ctx, i)[2] for i in (7, 7, 8)]
    keys = [json.loads(body)["dedup_key"] for body in bodies if body is not None]
    assert keys[0] == keys[1] != keys[2]
    assert len(keys) == 3
