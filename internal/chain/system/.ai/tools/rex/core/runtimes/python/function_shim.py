"""rex python/function runtime shim.

Usage: python function_shim.py TOOL_PATH PROJECT_PATH < params.json

Imports TOOL_PATH, calls its execute(params, project_path) (a coroutine
function is run with asyncio), and prints the result as JSON on stdout.
Exit status: 0, or 1 when execute raises or returns a mapping with
"success": false, or 2 when the tool has no execute().
"""
import asyncio
import importlib.util
import inspect
import json
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: function_shim.py TOOL_PATH PROJECT_PATH\n")
        return 2
    tool_path, project_path = sys.argv[1], sys.argv[2]
    # The tool's directory, not the shim's, is where its own imports live.
    sys.path[0] = os.path.dirname(os.path.abspath(tool_path))
    spec = importlib.util.spec_from_file_location("rex_tool", tool_path)
    if spec is None or spec.loader is None:
        sys.stderr.write("rex: cannot load %s as a Python module\n" % tool_path)
        return 2
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = getattr(mod, "execute", None)
    if not callable(fn):
        sys.stderr.write("rex: %s defines no execute(params, project_path)\n" % tool_path)
        return 2
    raw = sys.stdin.read()
    params = json.loads(raw) if raw.strip() else {}
    if inspect.iscoroutinefunction(fn):
        result = asyncio.run(fn(params, project_path))
    else:
        result = fn(params, project_path)
    if result is None:
        result = {}
    sys.stdout.write(json.dumps(result, default=str) + "\n")
    sys.stdout.flush()
    if isinstance(result, dict) and result.get("success") is False:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
