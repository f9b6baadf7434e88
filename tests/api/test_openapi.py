"""The OpenAPI schema documents every field of every answer (issue 20): each route's 200
response has a schema, and nothing in it is an empty schema, an object without properties or
typed values (`dict[str, Any]`), or an array of anything."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from profboard.server.app import create_app
from profboard.server.settings import Settings

DOC_KEYS = {"title", "description", "default", "examples", "deprecated"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> dict:
    app = create_app(Settings(logdir=str(tmp_path_factory.mktemp("empty")), cache_dir=None, rescan_seconds=3600))
    with TestClient(app, base_url="http://localhost") as client:
        response = client.get("/openapi.json")
        assert response.status_code == 200
        return response.json()


def untyped_parts(schema: dict, defs: dict, path: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """Where `schema` (resolving $refs) leaves a value undocumented."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return [] if name in seen else untyped_parts(defs[name], defs, f"{path}<{name}>", seen | {name})
    found = []
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            found += untyped_parts(sub, defs, path, seen)
    if not set(schema) - DOC_KEYS:
        return found + [f"{path}: empty schema (Any)"]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        if not properties and not (isinstance(extra, dict) and extra):
            found.append(f"{path}: object without properties or typed values")
        for name, sub in properties.items():
            found += untyped_parts(sub, defs, f"{path}.{name}", seen)
        if isinstance(extra, dict) and extra:
            found += untyped_parts(extra, defs, f"{path}.*", seen)
    elif kind == "array":
        items = schema.get("items")
        found += untyped_parts(items, defs, f"{path}[]", seen) if items else [f"{path}: array of anything"]
    return found


def _operations(spec: dict) -> list[tuple[str, str, dict]]:
    return [(method.upper(), path, op) for path, item in spec["paths"].items() for method, op in item.items()]


def test_every_route_has_a_documented_200_answer(spec):
    operations = _operations(spec)
    assert len([p for _, p, _ in operations if p.startswith("/api/")]) >= 25
    missing = [f"{m} {p}" for m, p, op in operations
               if not any(c.get("schema") for c in op["responses"].get("200", {}).get("content", {}).values())]
    assert not missing, f"routes whose 200 answer has no schema: {missing}"


def test_no_route_answers_an_untyped_object(spec):
    defs = spec.get("components", {}).get("schemas", {})
    problems = []
    for method, path, op in _operations(spec):
        for content in op["responses"].get("200", {}).get("content", {}).values():
            problems += untyped_parts(content.get("schema", {}), defs, f"{method} {path}")
    assert not problems, "undocumented parts of answers:\n" + "\n".join(problems)


@pytest.mark.parametrize(("schema", "complaint"), [
    ({}, "empty schema"),
    ({"type": "object"}, "object without properties"),
    ({"type": "object", "additionalProperties": True}, "object without properties"),
    ({"type": "array"}, "array of anything"),
    ({"type": "array", "items": {"type": "object", "properties": {"x": {}}}}, "empty schema"),
    ({"anyOf": [{"type": "object"}, {"type": "null"}]}, "object without properties"),
    ({"$ref": "#/components/schemas/Loose"}, "object without properties"),
], ids=["any", "dict", "dict-any", "list", "field-any", "optional-dict", "ref"])
def test_untyped_parts_finds_what_it_should(schema, complaint):
    """The checker itself: each shape that `dict[str, Any]`, `list` or `Any` produce is caught."""
    found = untyped_parts(schema, {"Loose": {"type": "object", "title": "Loose"}}, "x")
    assert found and complaint in found[0], found


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "integer"}}},
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "array", "items": {"type": "string"}},
    {"anyOf": [{"type": "number"}, {"type": "null"}]},
    {"type": "string", "format": "binary"},
], ids=["model", "typed-map", "list-of-str", "optional-float", "binary"])
def test_untyped_parts_accepts_typed_schemas(schema):
    assert untyped_parts(schema, {}, "x") == []
