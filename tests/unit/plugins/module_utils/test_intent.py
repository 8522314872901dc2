"""The host's intent as a file: masked secrets, a stable text, and the refusal of anything that is not an intent."""

import json

from _load import load

intent = load("intent")


def test_urls_lose_their_user_and_password_everywhere():
    value = {
        "cuda_repo": {"base_url": "https://mirror-user:s3cret@mirror.example/cuda/debian12/x86_64/"},
        "nested": [{"url": "http://token@host/x"}, "ftp://a:b@c/d and https://plain.example/e"],
        "number": 3,
    }
    masked = intent.redact(value)
    text = json.dumps(masked)
    assert "s3cret" not in text and "mirror-user" not in text and "token@" not in text and "a:b@" not in text
    assert masked["cuda_repo"]["base_url"] == "https://***@mirror.example/cuda/debian12/x86_64/"
    assert masked["nested"][1] == "ftp://***@c/d and https://plain.example/e"
    assert masked["number"] == 3


def test_the_document_and_its_text_are_stable():
    first = intent.document("gpu1", {"nccl": {"nccl_version": "2.21.5", "conf": {"B": 1, "A": 2}}})
    second = intent.document("gpu1", {"nccl": {"conf": {"A": 2, "B": 1}, "nccl_version": "2.21.5"}})
    assert first == {
        "schema": 1,
        "host": "gpu1",
        "roles": {"nccl": {"nccl_version": "2.21.5", "conf": {"B": 1, "A": 2}}},
    }  # noqa: E501
    assert intent.render(first) == intent.render(second)
    assert intent.render(first).endswith("}\n") and json.loads(intent.render(first)) == first


def test_anything_but_an_intent_is_refused_with_the_fix():
    assert intent.errors(None)[0].startswith("no intent: run gpucluster.fabric.preflight earlier in the same run")
    assert intent.errors({"schema": 2, "roles": {}}) == ["intent schema 2 is not 1"]
    assert intent.errors({"schema": 1, "roles": []}) == ["intent has no roles mapping"]
    assert intent.errors(intent.document("gpu1", {})) == []


def test_a_part_with_a_masked_url_is_named():
    """Module apply takes a role's arguments from the intent, unless a URL in them was masked there."""
    document = intent.document(
        "gpu1", {"cuda_repo": {"base_url": "https://u:p@mirror.example/cuda/"}, "nccl": {"nccl_version": "2.21.5"}}
    )
    assert document["masked"] == ["cuda_repo"] and document["roles"]["cuda_repo"]["base_url"].startswith("https://***@")
    assert "masked" not in intent.document("gpu1", {"nccl": {"nccl_version": "2.21.5"}})
