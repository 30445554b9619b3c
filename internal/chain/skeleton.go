package chain

import (
	"fmt"
	"strings"
)

// CheckID reports whether id is a well-formed tool id (my/tool): segments
// of letters, digits, '_', '-' and '.', none empty or starting with a dot.
func CheckID(id string) error { return checkID(id) }

// ItemExtensions lists the file extensions an item may have.
func ItemExtensions() []string {
	var out []string
	for _, e := range itemExts() {
		out = append(out, e.ext)
	}
	return out
}

// Runtimes a skeleton can be written for, by short name.
var skeletonRuntimes = []struct {
	name, id, ext string
}{
	{"sh", "rex/core/runtimes/sh/sh", ".sh"},
	{"bash", "rex/core/runtimes/bash/bash", ".sh"},
	{"python", "rex/core/runtimes/python/function", ".py"},
	{"node", "rex/core/runtimes/node/node", ".js"},
}

// SkeletonRuntimes lists the short runtime names Skeleton takes.
func SkeletonRuntimes() []string {
	out := make([]string, len(skeletonRuntimes))
	for i, r := range skeletonRuntimes {
		out[i] = r.name
	}
	return out
}

// Skeleton returns the file name extension and content of a working tool
// for id on runtime (a short name from SkeletonRuntimes, or a runtime's
// id whose file kind is known from its interpreter). The tool greets
// --param name, prints JSON when REX_OUTPUT=json, and shows every part of
// a tool file: header, version, description, parameters.
func (e *Engine) Skeleton(id, runtime string) (ext string, content []byte, err error) {
	if err := checkID(id); err != nil {
		return "", nil, fmt.Errorf("%w; ids look like my/tool", err)
	}
	if runtime == "" {
		runtime = "sh"
	}
	rtID := ""
	for _, r := range skeletonRuntimes {
		if r.name == runtime || r.id == runtime {
			rtID, ext = r.id, r.ext
		}
	}
	family := ""
	if rtID == "" {
		// A runtime of the operator's own: its file kind follows its interpreter.
		c, err := e.Chain(runtime, nil)
		if err != nil {
			return "", nil, fmt.Errorf("--runtime %s: %w", runtime, err)
		}
		el := c.Tool()
		if el.Meta.ToolType != "runtime" {
			return "", nil, fmt.Errorf("--runtime %s is not a runtime (its file does not say tool_type: runtime)", runtime)
		}
		prog := ""
		if in := el.Meta.Env; in != nil && in.Interpreter != nil {
			prog = in.Interpreter.Binary
		} else if cmd, ok := el.Meta.Config["command"].(string); ok {
			prog = cmd
		}
		switch family = familyName(prog); family {
		case "sh", "bash":
			ext = ".sh"
		case "python":
			ext = ".py"
		case "node":
			ext = ".js"
		default:
			return "", nil, fmt.Errorf("--runtime %s runs %q, and rex does not know what a tool file for it looks like; use sh, bash, python or node, or write the file by hand (docs/tools.md)", runtime, prog)
		}
		rtID = runtime
	}
	if family == "" {
		family = runtime
	}
	desc := fmt.Sprintf("TODO: say what %s does", id)
	switch ext {
	case ".sh":
		return ext, []byte(shellSkeleton(rtID, desc)), nil
	case ".js":
		return ext, []byte(nodeSkeleton(rtID, desc)), nil
	}
	if rtID == "rex/core/runtimes/python/function" {
		return ext, []byte(pythonFunctionSkeleton(rtID, desc)), nil
	}
	return ext, []byte(pythonScriptSkeleton(rtID, desc)), nil
}

func familyName(prog string) string {
	switch f := family(strings.TrimPrefix(strings.TrimPrefix(prog, "${"), "$")); f {
	case famShell:
		return "sh"
	case famPython:
		return "python"
	case famNode:
		return "node"
	}
	return ""
}

const skeletonSchemaYAML = `config_schema:
  type: object
  properties:
    name: {type: string, default: world, pattern: "^[A-Za-z0-9 _.-]*$", description: "who to greet"}
  additionalProperties: false`

func header(marker, body string) string {
	var b strings.Builder
	for _, l := range strings.Split(body, "\n") {
		b.WriteString(marker + " rex: " + l + "\n")
	}
	return b.String()
}

func shellSkeleton(rt, desc string) string {
	shebang := "#!/bin/sh"
	if strings.Contains(rt, "bash") {
		shebang = "#!/bin/bash"
	}
	return shebang + "\n" + header("#", "executor_id: "+rt+"\nversion: \"0.1.0\"\ndescription: \""+desc+"\"\n"+skeletonSchemaYAML) +
		`#
# Parameters arrive as REX_PARAM_<NAME> variables (and as JSON on stdin).
# REX_OUTPUT is "json" when the caller asked for JSON (rex tool run --json).
set -eu
name=${REX_PARAM_NAME:-world}
host=$(uname -n)
if [ "${REX_OUTPUT:-}" = json ]; then
	# The schema's pattern keeps name free of characters JSON would escape.
	printf '{"greeting":"hello","name":"%s","host":"%s"}\n' "$name" "$host"
else
	printf 'hello %s from %s\n' "$name" "$host"
fi
`
}

func nodeSkeleton(rt, desc string) string {
	return "#!/usr/bin/env node\n" + header("//", "executor_id: "+rt+"\nversion: \"0.1.0\"\ndescription: \""+desc+"\"\n"+skeletonSchemaYAML) +
		`//
// Parameters arrive as JSON on stdin; REX_OUTPUT is "json" when the caller
// asked for JSON (rex tool run --json).
const os = require("os");
let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const params = JSON.parse(input || "{}");
  const out = { greeting: "hello", name: params.name, host: os.hostname() };
  if (process.env.REX_OUTPUT === "json") console.log(JSON.stringify(out));
  else console.log("hello " + out.name + " from " + out.host);
});
`
}

const pythonSchema = `CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "world", "pattern": "^[A-Za-z0-9 _.-]*$", "description": "who to greet"},
    },
    "additionalProperties": False,
}
`

func pythonFunctionSkeleton(rt, desc string) string {
	return `"""` + desc + `."""

__executor_id__ = "` + rt + `"
__version__ = "0.1.0"
` + pythonSchema + `

def execute(params, project_path):
    """Runs on the target; what it returns is printed as JSON."""
    import socket

    return {"greeting": "hello", "name": params["name"], "host": socket.gethostname()}
`
}

func pythonScriptSkeleton(rt, desc string) string {
	return `"""` + desc + `."""

__executor_id__ = "` + rt + `"
__version__ = "0.1.0"
` + pythonSchema + `
import json
import os
import socket
import sys

if __name__ == "__main__":
    params = json.load(sys.stdin)  # the parameters arrive as JSON on stdin
    out = {"greeting": "hello", "name": params["name"], "host": socket.gethostname()}
    if os.environ.get("REX_OUTPUT") == "json":
        print(json.dumps(out))
    else:
        print("hello %s from %s" % (out["name"], out["host"]))
`
}
