"""A strict YAML reader for spec files: YAML 1.2 core-schema scalars, duplicate keys refused, data only.

Why a PyYAML subclass and not a new dependency (ruamel.yaml, strictyaml): PyYAML is already required, its
SafeLoader never builds objects, and the two things it gets wrong for specs are both local to the resolver
and the constructor. PyYAML implements YAML 1.1, where `1:20` is the sexagesimal 80, `yes`/`on` are true,
`017` is octal 15, `1_000` is 1000 and `2026-01-01` a date; YAML 1.2 (core schema) reads all of those as
strings, and a spec field that wants a number then refuses them with its own name. PyYAML also lets a
repeated key silently replace the first (last wins); here it is an error at the key's line. The merge key
`<<` is YAML 1.1 only and is an ordinary (unknown) key here.
"""

from __future__ import annotations

import math
import re

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

INT = re.compile(r"[-+]?[0-9]+\Z|0o[0-7]+\Z|0x[0-9a-fA-F]+\Z")
FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z|[-+]?\.(inf|Inf|INF)\Z|\.(nan|NaN|NAN)\Z")
BOOL = re.compile(r"true\Z|True\Z|TRUE\Z|false\Z|False\Z|FALSE\Z")
NULL = re.compile(r"~\Z|null\Z|Null\Z|NULL\Z|\Z")


class StrictLoader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's implicit scalars and duplicate mapping keys refused."""

    yaml_implicit_resolvers: dict = {}

    def construct_mapping(self, node, deep=False):
        """A mapping with every key once (a duplicate key is an error, not 'last wins')."""
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                raise ConstructorError("while constructing a mapping", node.start_mark,
                                       "found an unhashable key", key_node.start_mark) from None
            if duplicate:
                raise ConstructorError("while constructing a mapping", node.start_mark,
                                       f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        """A YAML 1.2 integer: decimal, 0o octal or 0x hex (no 1.1 sexagesimal, underscores or leading-0 octal)."""
        text = self.construct_scalar(node)
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)

    def construct_yaml_float(self, node):
        """A YAML 1.2 float (.inf, .nan spelled as such; finiteness is checked later)."""
        text = self.construct_scalar(node).lower()
        if text.lstrip("+-") == ".inf":
            return -math.inf if text.startswith("-") else math.inf
        if text == ".nan":
            return math.nan
        return float(text)

    def construct_yaml_bool(self, node):
        """A YAML 1.2 boolean: only true/false (yes, on, y stay strings)."""
        return self.construct_scalar(node).lower() == "true"

    def construct_refused(self, node):
        """Refuse a tag a spec never holds (YAML 1.1 timestamps, sets, binary, Python objects)."""
        raise ConstructorError(None, None, f"the tag {node.tag!r} is not allowed in a spec", node.start_mark)


for _tag, _pattern, _first in (
    ("bool", BOOL, "tTfF"),
    ("int", INT, "-+0123456789"),
    ("float", FLOAT, "-+0123456789."),
    ("null", NULL, ["~", "n", "N", ""]),
):
    StrictLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", _pattern, list(_first))

StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)
StrictLoader.add_constructor("tag:yaml.org,2002:bool", StrictLoader.construct_yaml_bool)
# 1.1-only types: an explicit !!timestamp, !!binary, !!set, !!omap or !!pairs tag is refused, not built
for _tag in ("timestamp", "binary", "set", "omap", "pairs"):
    StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", StrictLoader.construct_refused)
