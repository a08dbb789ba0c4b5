"""The root address that `make run` prints leads a browser somewhere: the admin."""

from __future__ import annotations


def test_the_root_redirects_to_the_admin(client, db) -> None:
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    # Signed out, the admin sends a browser on to its login page.
    landing = client.get("/", follow=True)
    assert landing.status_code == 200
    assert landing.redirect_chain[-1][0].startswith("/admin/login/")


def test_other_unknown_addresses_stay_json_404s(client, db) -> None:
    response = client.get("/nothing-here")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
