"""The OpenAPI document: /schema, /schema/docs/openapi.json and the Swagger UI page all give the
one document the server serves (the decision route included); its types are what the server
really answers (real responses decoded strictly by the wire types the document is made of); the
bearer scheme appears exactly when a key is set."""

from __future__ import annotations

import json
import re
import time

import httpx
import msgspec
import pytest

from app import wire
from tests.conftest import run_server

KEY = "openapi-test-key"
BODY = {
    "state": "I was charged twice. Please refund the duplicate.",
    "questions": {
        "team": {
            "type": "choice",
            "instructions": "Which team?",
            "criteria": {"billing": "Charges", "technical": None},
        },
        "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["Low", "High"]},
        "refund": {"type": "noul", "instructions": "A refund?"},
    },
}


@pytest.fixture(scope="module", params=["open", "key"])
def served(english, tmp_path_factory, request):
    env = {"OMNI_MODELS": english[1], **({"OMNI_API_KEY": KEY} if request.param == "key" else {})}
    with run_server(tmp_path_factory.mktemp("openapi"), env) as server:
        yield server, request.param == "key"


def _refs(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_the_docs_page_renders_the_served_document(served):
    server, _ = served
    doc = httpx.get(server.url + "/schema").json()
    assert httpx.get(server.url + "/schema/docs/openapi.json").json() == doc
    page = httpx.get(server.url + "/schema/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    embedded = re.search(r"spec: (\{.*\}),\s*$", page.text, re.MULTILINE)
    assert embedded and json.loads(embedded.group(1)) == doc  # Swagger UI shows this document
    assert "/v1/systemone" in doc["paths"] and "post" in doc["paths"]["/v1/systemone"]
    schemas = doc["components"]["schemas"]
    for ref in set(_refs(doc)):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref


def test_answers_are_tagged_unions_of_each_profile(served):
    server, _ = served
    schemas = httpx.get(server.url + "/schema").json()["components"]["schemas"]
    for response, prefix in (("SystemOneResponse", ""), ("JevSystemOneResponse", "Jev")):
        answers = schemas[response]["properties"]["answers"]["additionalProperties"]
        mapping = {
            kind: "#/components/schemas/%s%sAnswer" % (prefix, kind.capitalize())
            for kind in ("choice", "score", "noul")
        }
        assert answers["discriminator"] == {"propertyName": "type", "mapping": mapping}
    assert set(schemas["JevChoiceAnswer"]["required"]) == {"type", "choice", "probabilities", "confidence"}
    assert set(schemas["JevScoreAnswer"]["required"]) == {"type", "score", "probabilities", "legend", "confidence"}
    assert set(schemas["JevNoulAnswer"]["required"]) == {"type", "noul"}
    assert "confidence" not in schemas["JevNoulAnswer"]["properties"]
    assert "x_option_rows" in schemas["JevChoiceAnswer"]["properties"]
    assert "instructions" not in schemas["NoulQuestion"].get("required", [])


def test_problems_health_and_security_are_documented(served):
    server, keyed = served
    doc = httpx.get(server.url + "/schema").json()
    op = doc["paths"]["/v1/systemone"]["post"]
    responses = op["responses"]
    assert {"200", "400", "408", "411", "413", "415", "422", "500", "503", "504"} <= set(responses)
    for status in ("413", "415", "422", "503"):
        assert responses[status]["content"]["application/problem+json"]["schema"]["$ref"].endswith("/ProblemDetails")
    assert responses["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/JevValidationError")
    assert responses["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/JevError")
    assert "overloaded" in responses["503"]["description"] and "429" in responses["503"]["description"]
    assert "Retry-After" in responses["503"]["headers"]
    assert any(p["name"] == "Prefer" and p["in"] == "header" for p in op["parameters"])
    ready = doc["paths"]["/readyz"]["get"]["responses"]
    assert ready["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Ready")
    assert ready["503"]["content"]["application/problem+json"]["schema"]["$ref"].endswith("/NotReady")
    assert "Retry-After" in ready["503"]["headers"]
    models = doc["paths"]["/v1/models"]["get"]
    if keyed:
        assert doc["components"]["securitySchemes"] == {
            "bearer": {"type": "http", "scheme": "bearer", "description": "The key set in `OMNI_API_KEY`."}
        }
        assert op["security"] == models["security"] == [{"bearer": []}]
        assert "WWW-Authenticate" in responses["401"]["headers"] and "401" in models["responses"]
    else:
        assert "securitySchemes" not in doc["components"]
        assert "security" not in op and "security" not in models and "401" not in responses


def test_real_responses_decode_as_their_documented_types(served):
    server, keyed = served
    auth = {"authorization": "Bearer " + KEY} if keyed else {}

    def post(body, **headers):
        return httpx.post(server.url + "/v1/systemone", json=body, headers={**auth, **headers}, timeout=30)

    reference = msgspec.json.decode(post(BODY).content, type=wire.SystemOneResponse)
    assert [type(a) for a in reference.answers.values()] == [wire.ChoiceAnswer, wire.ScoreAnswer, wire.NoulAnswer]
    jev = msgspec.json.decode(post(BODY, prefer="profile=jev").content, type=wire.JevSystemOneResponse)
    assert [type(a) for a in jev.answers.values()] == [wire.JevChoiceAnswer, wire.JevScoreAnswer, wire.JevNoulAnswer]
    invalid = {"state": "x", "questions": {"q": {"type": "choice", "instructions": "?", "criteria": {}}}}
    problem = post(invalid)
    assert problem.headers["content-type"] == "application/problem+json"
    assert msgspec.json.decode(problem.content, type=wire.ProblemDetails).errors[0].question == "q"
    msgspec.json.decode(post(invalid, prefer="profile=jev").content, type=wire.JevValidationError)
    msgspec.json.decode(post(dict(BODY, model="nope"), prefer="profile=jev").content, type=wire.JevValidationError)
    msgspec.json.decode(httpx.get(server.url + "/readyz").content, type=wire.Ready)
    msgspec.json.decode(httpx.get(server.url + "/livez").content, type=wire.Status)
    msgspec.json.decode(httpx.get(server.url + "/v1/models", headers=auth).content, type=wire.ModelList)
    if keyed:
        refused = httpx.post(server.url + "/v1/systemone", json=BODY, headers={"prefer": "profile=jev"})
        assert refused.status_code == 401
        assert msgspec.json.decode(refused.content, type=wire.JevError).detail.error_type == "authentication_error"


def test_a_not_ready_server_answers_the_documented_503(english, tmp_path):
    # No CUDA provider here: asking for the GPU is a fatal load failure, so /readyz stays 503.
    with run_server(tmp_path, {"OMNI_MODELS": english[1], "OMNI_DEVICE": "cuda:0"}, wait_ready=False) as server:
        deadline = time.monotonic() + 30
        while True:
            r = httpx.get(server.url + "/readyz")
            body = msgspec.json.decode(r.content, type=wire.NotReady)
            if body.models and body.models[0].state == "failed":
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
    assert body.code == "not_ready" and int(r.headers["retry-after"]) >= 1 and body.models[0].error
