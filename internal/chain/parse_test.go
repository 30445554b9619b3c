package chain

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParsePythonValues(t *testing.T) {
	src := `"""Tool docstring.

More text."""
import os
__version__ = "1.2.3"
__executor_id__ = 'rex/core/runtimes/python/script'
TRIPLE = """a
'b' "c"
"""
RAW = r'\d+\n'
ESC = "tab\there\x41\u00e9\q"
CONCAT = "ab" 'cd' \
    "ef"
NUMS = [1, -2, 0x1F, 0o17, 0b101, 1_000, 1.5, -2.5e3, .5, 5., +7, 00]
FLAGS = (True, False, None)
SINGLE = (1,)
PAREN = (42)
EMPTY = ([], {}, ())
NESTED = {"a": {"b": [1, {"c": "d"}]}, "e": (1, 2,),}
BARE_TUPLE = 1, "x"
ANNOT: dict = {"k": "v"}
A = 1; B = "two"
MULTI = [
    "x",  # a comment with = sign
    "y",
]
DATE = "a" # trailing comment
def execute(params, project_path):
    INSIDE = "not top level"
    return params
class K:
    CLASS_ATTR = 1
if True:
    CONDITIONAL = 1
`
	m := parsePython([]byte(src))
	if m.Stopped != "" {
		t.Fatalf("stopped: %s", m.Stopped)
	}
	want := map[string]any{
		"__version__":     "1.2.3",
		"__executor_id__": "rex/core/runtimes/python/script",
		"TRIPLE":          "a\n'b' \"c\"\n",
		"RAW":             `\d+\n`,
		"ESC":             "tab\thereA\u00e9\\q",
		"CONCAT":          "abcdef",
		"NUMS":            []any{int64(1), int64(-2), int64(31), int64(15), int64(5), int64(1000), 1.5, -2500.0, 0.5, 5.0, int64(7), int64(0)},
		"FLAGS":           []any{true, false, nil},
		"SINGLE":          []any{int64(1)},
		"PAREN":           int64(42),
		"EMPTY":           []any{[]any{}, map[string]any{}, []any{}},
		"NESTED":          map[string]any{"a": map[string]any{"b": []any{int64(1), map[string]any{"c": "d"}}}, "e": []any{int64(1), int64(2)}},
		"BARE_TUPLE":      []any{int64(1), "x"},
		"ANNOT":           map[string]any{"k": "v"},
		"A":               int64(1),
		"B":               "two",
		"MULTI":           []any{"x", "y"},
		"DATE":            "a",
	}
	if !reflect.DeepEqual(m.Values, want) {
		for k, v := range want {
			if !reflect.DeepEqual(m.Values[k], v) {
				t.Errorf("%s = %#v, want %#v", k, m.Values[k], v)
			}
		}
		for k := range m.Values {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected %s = %#v", k, m.Values[k])
			}
		}
	}
	if m.Doc != "Tool docstring.\n\nMore text." {
		t.Errorf("doc = %q", m.Doc)
	}
	if m.Lines["__version__"] != 5 {
		t.Errorf("line of __version__ = %d, want 5", m.Lines["__version__"])
	}
	for _, n := range []string{"execute", "K"} {
		if _, ok := m.Skipped[n]; !ok {
			t.Errorf("%s should be recorded as redefined", n)
		}
	}
}

func TestParsePythonSkips(t *testing.T) {
	tests := []struct {
		name, src, reason string
	}{
		{"CALL", `CALL = dict(a=1)`, "a call to dict"},
		{"FSTR", `FSTR = f"x{y}"`, "f-string"},
		{"BYTES", `BYTES = b"x"`, "bytes"},
		{"EXPR", `EXPR = 1 + 2`, "follows the value"},
		{"NAME", `NAME = other`, "the name other"},
		{"SET", `SET = {1, 2}`, "set literal"},
		{"KEY", `KEY = {1: "a"}`, "key is not a string"},
		{"CHAIN", `CHAIN = X = 1`, "chained"},
		{"AUG", "AUG = [1]\nAUG += [2]", "changed by +="},
		{"ITEM", "ITEM = {}\nITEM['a'] = 1", "item or attribute"},
		{"BIG", `BIG = 99999999999999999999`, "too large"},
		{"INF", `INF = 1e999`, "out of range"},
		{"CPLX", `CPLX = 1j`, "complex"},
		{"LEAD", `LEAD = 007`, "leading zero"},
		{"NESC", `NESC = "\N{BULLET}"`, `\N{...}`},
		{"DEEP", "DEEP = " + strings.Repeat("[", 100) + strings.Repeat("]", 100), "nested too deeply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parsePython([]byte(tt.src))
			if v, ok := m.Values[tt.name]; ok {
				t.Fatalf("%s parsed as %#v, want skipped", tt.name, v)
			}
			sk, ok := m.Skipped[tt.name]
			if !ok || !strings.Contains(sk.Reason, tt.reason) {
				t.Fatalf("skip reason %q, want it to contain %q", sk.Reason, tt.reason)
			}
		})
	}
}

func TestParsePythonLastAssignmentWins(t *testing.T) {
	m := parsePython([]byte("X = call()\nX = 'ok'\nY = 'a'\nY = call()\n"))
	if m.Values["X"] != "ok" {
		t.Errorf("X = %#v, want ok", m.Values["X"])
	}
	if _, ok := m.Values["Y"]; ok {
		t.Errorf("Y must not keep its earlier value once reassigned to a non-literal")
	}
}

func TestParsePythonUnterminated(t *testing.T) {
	m := parsePython([]byte("A = 'ok'\nB = \"\"\"never closed\n"))
	if m.Values["A"] != "ok" || m.Stopped == "" {
		t.Fatalf("values %v stopped %q: want A kept and a stop reason", m.Values, m.Stopped)
	}
}

func FuzzPythonMetadata(f *testing.F) {
	for _, s := range []string{
		`__executor_id__ = "rex/core/runtimes/python/script"`,
		"X = [1, (2, 3), {'a': None}]\n",
		"\"\"\"doc\"\"\"\nA: int = 0x_ff\n",
		"A = r'''\\'''\nB = -(-1)",
		"if x:\n  A = 1\nB = 'a' 'b'",
		"A = '\\x4",
		"A = {",
		"A = 1e+",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		m := parsePython(src)
		for name, v := range m.Values {
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("%s = %#v has no JSON form: %v", name, v, err)
			}
			if _, skipped := m.Skipped[name]; skipped {
				t.Fatalf("%s is both a value and skipped", name)
			}
		}
		if parsePython(src).Stopped != m.Stopped {
			t.Fatal("parse is not deterministic")
		}
	})
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		name, src, marker string
		want              map[string]any
		found             bool
		err               string
	}{
		{"bash", "#!/bin/bash\n# rex: executor_id: rex/core/runtimes/bash/bash\n# rex: version: \"1.0.0\"\n\n# rex: description: Say hi\n# plain comment\necho hi\n# rex: ignored: after body\n", "#",
			map[string]any{"executor_id": "rex/core/runtimes/bash/bash", "version": "1.0.0", "description": "Say hi"}, true, ""},
		{"no space after colon", "# rex:executor_id: a/b\n", "#", map[string]any{"executor_id": "a/b"}, true, ""},
		{"nested", "# rex: config_schema:\n# rex:   required: [name]\n# rex:   properties:\n# rex:     name: {type: string}\n", "#",
			map[string]any{"config_schema": map[string]any{"required": []any{"name"}, "properties": map[string]any{"name": map[string]any{"type": "string"}}}}, true, ""},
		{"js", "#!/usr/bin/env node\n// rex: executor_id: rex/core/runtimes/node/node\nconsole.log(1)\n", "//",
			map[string]any{"executor_id": "rex/core/runtimes/node/node"}, true, ""},
		{"crlf", "# rex: executor_id: a/b\r\n# rex: version: 1.0.0\r\n", "#", map[string]any{"executor_id": "a/b", "version": "1.0.0"}, true, ""},
		{"none", "#!/bin/sh\necho hi\n", "#", nil, false, ""},
		{"code first", "echo hi\n# rex: executor_id: a/b\n", "#", nil, false, ""},
		{"bad yaml", "# rex: a: [\n", "#", nil, true, "header"},
		{"not a mapping", "# rex: - a\n", "#", nil, true, "not a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, found, err := parseHeader([]byte(tt.src), tt.marker)
			if found != tt.found {
				t.Fatalf("found = %v, want %v", found, tt.found)
			}
			if tt.err != "" {
				errorContains(t, err, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) && !(len(got) == 0 && tt.want == nil) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func FuzzShellHeader(f *testing.F) {
	f.Add([]byte("#!/bin/bash\n# rex: executor_id: a/b\n# rex: version: \"1.0.0\"\n"), "#")
	f.Add([]byte("// rex: x: &a [*a]\n"), "//")
	f.Add([]byte("# rex: a: !!binary aGk=\n# rex: b: 2001-01-01\n"), "#")
	f.Add([]byte("# rex: <<: {a: 1}\n"), "#")
	f.Fuzz(func(t *testing.T, src []byte, marker string) {
		if marker != "#" && marker != "//" {
			marker = "#"
		}
		raw, doc, found, err := parseHeader(src, marker)
		if err == nil && found {
			if _, err := json.Marshal(raw); err != nil {
				t.Fatalf("header %#v has no JSON form: %v", raw, err)
			}
			// Whatever parsed must convert to metadata or fail cleanly.
			_, _ = metadataFromRaw(raw, doc)
		}
	})
}

func TestParseDotEnv(t *testing.T) {
	src := "# comment\n" +
		"PLAIN=value\n" +
		"  SPACED = spaced value   \n" +
		"export EXPORTED=yes\n" +
		"INLINE=abc # comment\n" +
		"HASH=a#b\n" +
		"SINGLE='lit $PLAIN ${PLAIN} \\n'\n" +
		"DOUBLE=\"line1\\nline2 \\\"q\\\" \\$PLAIN ${PLAIN}\"\n" +
		"MULTI=\"a\nb\"\n" +
		"REF=${PLAIN}-${OUTER}-${MISSING:-dflt}\n" +
		"EMPTY=\n" +
		"EMPTYQ=''\n" +
		"PLAIN=override\r\n"
	got, err := parseDotEnv([]byte(src), func(n string) (string, bool) {
		if n == "OUTER" {
			return "outer", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []envVar{
		{"PLAIN", "value", 2},
		{"SPACED", "spaced value", 3},
		{"EXPORTED", "yes", 4},
		{"INLINE", "abc", 5},
		{"HASH", "a#b", 6},
		{"SINGLE", `lit $PLAIN ${PLAIN} \n`, 7},
		{"DOUBLE", "line1\nline2 \"q\" $PLAIN value", 8},
		{"MULTI", "a\nb", 9},
		{"REF", "value-outer-dflt", 11},
		{"EMPTY", "", 12},
		{"EMPTYQ", "", 13},
		{"PLAIN", "override", 14},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%#v\nwant\n%#v", got, want)
	}
}

func TestParseDotEnvErrors(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"NOEQUALS\n", "line 1: NOEQUALS has no '='"},
		{"1BAD=x\n", "line 1: expected KEY=VALUE"},
		{"A=ok\nB='open\n", "line 2: the single quote of B"},
		{"A=\"open\n", "line 1: the double quote of A"},
		{"A='x' junk\n", "unexpected text after the value of A"},
	} {
		_, err := parseDotEnv([]byte(tt.src), nil)
		errorContains(t, err, tt.want)
	}
}

// dotenvQuote renders a value so parseDotEnv reads it back exactly.
func dotenvQuote(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(v) + `"`
}

func FuzzDotEnv(f *testing.F) {
	f.Add([]byte("A=1\nexport B='x'\nC=\"y\\n${A}\"\n# c\n"), "value $x \"q\"")
	f.Add([]byte("A=${B:-${C:-d}}\n"), "")
	f.Add([]byte("A=\"unterminated\n"), "'")
	f.Fuzz(func(t *testing.T, src []byte, value string) {
		vars, err := parseDotEnv(src, nil)
		if err == nil {
			for _, v := range vars {
				if !isName(v.Key) {
					t.Fatalf("accepted invalid key %q", v.Key)
				}
			}
		}
		// Round trip: any value, written double-quoted, reads back intact.
		got, err := parseDotEnv([]byte("K="+dotenvQuote(value)+"\n"), nil)
		if err != nil {
			t.Fatalf("quoted %q: %v", value, err)
		}
		if len(got) != 1 || got[0].Value != value {
			t.Fatalf("round trip of %q gave %#v", value, got)
		}
	})
}

func TestSemver(t *testing.T) {
	valid := []string{"0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85", "1.0.0-x-y-z.--"}
	for _, v := range valid {
		sv, err := parseSemver(v)
		if err != nil {
			t.Errorf("%q: %v", v, err)
			continue
		}
		if sv.String() != v {
			t.Errorf("%q renders as %q", v, sv.String())
		}
	}
	invalid := []string{"", "1", "1.0", "v1.0.0", "1.0.0.0", "01.0.0", "1.02.0", "1.0.0-", "1.0.0-01", "1.0.0+", "1.0.0-a..b", "1.0.0-a_b", " 1.0.0", "1.0.0 ", "18446744073709551616.0.0", "1.0.-1"}
	for _, v := range invalid {
		if _, err := parseSemver(v); err == nil {
			t.Errorf("%q parsed; want an error", v)
		}
	}
	// semver.org's precedence example, in order.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0"}
	for i := range order {
		for j := range order {
			a, _ := parseSemver(order[i])
			b, _ := parseSemver(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.compare(b); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	a, _ := parseSemver("1.0.0+a")
	b, _ := parseSemver("1.0.0+b")
	if a.compare(b) != 0 {
		t.Error("build metadata must not affect precedence")
	}
}

func FuzzSemver(f *testing.F) {
	for _, s := range []string{"1.2.3", "1.0.0-alpha.1+build.5", "01.2.3", "1.2", "1.0.0-0a.00"} {
		f.Add(s, "1.0.0")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, errA := parseSemver(a)
		vb, errB := parseSemver(b)
		if errA == nil && va.String() != a {
			t.Fatalf("%q is valid but renders as %q", a, va.String())
		}
		if errA == nil && errB == nil {
			if va.compare(vb) != -vb.compare(va) {
				t.Fatalf("compare(%q, %q) is not antisymmetric", a, b)
			}
			if va.compare(va) != 0 {
				t.Fatalf("%q does not equal itself", a)
			}
		}
	})
}

func TestExpandVars(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "B": "${A}"}
	look := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"${A}", "alpha"},
		{"x${A}y${A}", "xalphayalpha"},
		{"${MISSING}", ""},
		{"${MISSING:-def}", "def"},
		{"${EMPTY:-def}", "def"},
		{"${EMPTY-def}", ""},
		{"${MISSING-def}", "def"},
		{"${A:-def}", "alpha"},
		{"${MISSING:-${A}}", "alpha"},
		{"${MISSING:-{braces}}", "{braces}"},
		{"${B}", "${A}"}, // values are not rescanned
		{"$A", "$A"},
		{"${", "${"},
		{"${1A}", "${1A}"},
		{"${A", "${A"},
		{"${A:x}", "${A:x}"},
		{"$${A}", "$alpha"},
	}
	for _, tt := range tests {
		if got := expandVars(tt.in, look); got != tt.want {
			t.Errorf("expandVars(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A}", "${A:-${B:-c}}", "$", "${", "${A-}", "x${A}y", "${A:-{}}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		look := func(n string) (string, bool) {
			if n == "A" {
				return "${A}", true // a value that looks like a reference
			}
			return "", false
		}
		out := expandVars(s, look)
		if !strings.Contains(s, "${") && out != s {
			t.Fatalf("text without ${ changed: %q → %q", s, out)
		}
		if out != expandVars(s, look) {
			t.Fatal("not deterministic")
		}
		// pass1 and expandVars agree.
		if got := flatten(pass1(s, look)); got != out {
			t.Fatalf("pass1 %q != expandVars %q", got, out)
		}
	})
}

func TestWithin(t *testing.T) {
	tests := []struct {
		base, p string
		want    bool
	}{
		{"/base", "/base", true},
		{"/base", "/base/x", true},
		{"/base", "/base/x/../y", true},
		{"/base", "/base2", false},
		{"/base", "/base2/x", false},
		{"/base", "/bas", false},
		{"/base", "/base/../base2", false},
		{"/base/", "/base/x", true},
		{"/", "/anything", true},
		{"/base", "base/x", false},
		{".", "a/b", true},
		{".", "..", false},
		{".", "../x", false},
		{".", "..x", true},
		{".ai/tools", ".ai/tools/x", true},
		{".ai/tools", ".ai/toolsx", false},
	}
	for _, tt := range tests {
		if got := within(tt.base, tt.p); got != tt.want {
			t.Errorf("within(%q, %q) = %v, want %v", tt.base, tt.p, got, tt.want)
		}
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"a", "my/tool", "rex/core/runtimes/python/script", "a-b/c_d.e"} {
		if err := checkID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", "/a", "a/", "a//b", "../a", "a/../b", "./a", ".hidden", "a b", "a\\b", "-x", strings.Repeat("a", 300)} {
		if err := checkID(id); err == nil {
			t.Errorf("%q accepted", id)
		}
	}
}
