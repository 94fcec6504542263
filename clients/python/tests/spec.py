"""Checks recorded exchanges against api/openapi.yaml (OpenAPI 3.0).

For each exchange: the operation exists for the method and path, the request
body is one its schema allows, the status is one the operation lists, the
answer's media type is the one listed for that status, its body is valid
against the schema, and its required headers (and Retry-After) are there and
valid. OpenAPI 3.0 schemas are JSON Schema with ``nullable``; they are
translated to JSON Schema draft 7 and checked with Debian's python3-jsonschema.
"""

from __future__ import annotations

import copy
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import jsonschema
import yaml

METHODS = ("get", "put", "post", "delete", "patch")


def _translate(node: Any) -> Any:
    """OpenAPI 3.0 schema → JSON Schema: ``nullable: true`` becomes an
    alternative of null."""
    if isinstance(node, list):
        return [_translate(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _translate(v) for k, v in node.items() if k not in ("nullable", "example", "discriminator", "xml", "externalDocs")}
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


class Spec:
    def __init__(self, path: Path) -> None:
        with open(path) as f:
            self.doc = yaml.safe_load(f)
        self.root = {"components": _translate(copy.deepcopy(self.doc["components"]))}
        self.resolver = jsonschema.RefResolver("", self.root)
        self.routes: List[Tuple[re.Pattern[str], str, Dict[str, Any]]] = []
        for template, item in self.doc["paths"].items():
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            self.routes.append((re.compile(pattern), template, item))
        # Literal paths before templated ones (/leases/x/acquire is not /leases/{jobId}).
        self.routes.sort(key=lambda r: r[1].count("{"))

    def _validate(self, instance: Any, schema: Dict[str, Any]) -> List[str]:
        validator = jsonschema.Draft7Validator(_translate(schema), resolver=self.resolver)
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(instance)]

    def _deref(self, node: Dict[str, Any]) -> Dict[str, Any]:
        while "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            target: Any = self.doc
            for part in ref[2:].split("/"):
                target = target[part]
            node = target
        return node

    def operation(self, method: str, path: str) -> Optional[Tuple[str, Dict[str, Any]]]:
        for pattern, template, item in self.routes:
            if pattern.match(path) and method.lower() in item:
                return template, item[method.lower()]
        return None

    def check(self, exchange: Dict[str, Any]) -> List[str]:
        """What is wrong with one exchange (empty: it is what the spec allows)."""
        method, target = exchange["method"], exchange["path"]
        path = urllib.parse.urlsplit(target).path
        where = f"{method} {target} -> {exchange['status']}"
        found = self.operation(method, path)
        if found is None:
            return [f"{where}: no operation for {method} {path} in the spec"]
        _, op = found
        problems: List[str] = []

        body = exchange.get("requestBody")
        if body is not None:
            request = self._deref(op.get("requestBody", {}))
            schema = request.get("content", {}).get("application/json", {}).get("schema")
            if schema is None:
                problems.append(f"{where}: the operation takes no JSON body")
            else:
                problems += [f"{where}: request: {p}" for p in self._validate(body, schema)]

        status = str(exchange["status"])
        responses = op.get("responses", {})
        response = responses.get(status) or responses.get("default")
        if response is None:
            return problems + [f"{where}: status {status} is not listed (listed: {', '.join(sorted(responses))})"]
        response = self._deref(response)
        headers = {k.lower(): v for k, v in exchange["headers"].items()}

        for name, header in response.get("headers", {}).items():
            header = self._deref(header)
            value = headers.get(name.lower())
            if value is None:
                if header.get("required"):
                    problems.append(f"{where}: required header {name} missing")
                continue
            schema = header.get("schema", {})
            instance: Any = value
            if schema.get("type") == "integer":
                try:
                    instance = int(value)
                except ValueError:
                    problems.append(f"{where}: header {name}: {value!r} is not an integer")
                    continue
            problems += [f"{where}: header {name}: {p}" for p in self._validate(instance, schema)]
        if exchange["status"] in (429, 503) and "retry-after" not in headers:
            problems.append(f"{where}: Retry-After missing")

        content = response.get("content")
        if not content:
            return problems
        media = headers.get("content-type", "").split(";")[0].strip()
        if media not in content:
            return problems + [f"{where}: content type {media!r}, the spec lists {', '.join(content)}"]
        schema = content[media].get("schema")
        if schema is None:
            return problems
        try:
            instance = json.loads(exchange["body"])
        except ValueError as err:
            return problems + [f"{where}: body is not JSON: {err}"]
        return problems + [f"{where}: body: {p}" for p in self._validate(instance, schema)]
