from __future__ import annotations


def measure(**kwargs):
    raise NotImplementedError
