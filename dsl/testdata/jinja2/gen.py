"""Regenerates expected.json: what Jinja2 gives for each template of
cases.json (python3 gen.py, with jinja2 installed). A native case renders
with jinja2.nativetypes (the value of the expression); a text case renders
to a string. An expression Jinja2 rejects records the exception's class."""
import json
import os

import jinja2
from jinja2.nativetypes import NativeEnvironment

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "cases.json")) as f:
    doc = json.load(f)

native = NativeEnvironment()
text = jinja2.Environment()
out = []
for case in doc["cases"]:
    env = native if case.get("native", True) else text
    try:
        value = env.from_string(case["template"]).render(**doc["vars"])
        if isinstance(value, tuple):
            value = list(value)
        out.append({"template": case["template"], "value": value})
    except Exception as e:  # noqa: BLE001 - the class is the expectation
        out.append({"template": case["template"], "error": type(e).__name__})

with open(os.path.join(here, "expected.json"), "w") as f:
    json.dump({"jinja2": jinja2.__version__, "results": out}, f, indent=1, sort_keys=True)
    f.write("\n")
