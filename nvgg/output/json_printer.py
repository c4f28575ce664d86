"""The JSON printer: a report's versioned document (result.document; its JSON Schema is
nvgg/schema/nvgg.schema.json), indented, for scripts and for nvgg itself to read back."""

from __future__ import annotations

import json

from ..result import KINDS
from .printer import Printer, register


@register
class JsonPrinter(Printer):
    name = "json"
    kinds = KINDS
    about = "the result document, for scripts"

    def render(self, report) -> str:
        return json.dumps(report.document(), indent=2, default=str) + "\n"
