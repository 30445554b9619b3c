package rexd_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAllowCommandsRefusesJavaToolOptions: the JVM reads
// JAVA_TOOL_OPTIONS (and _JAVA_OPTIONS, JDK_JAVA_OPTIONS) as options of
// every java it starts: -javaagent, -Xbootclasspath/a or
// -Djava.system.class.loader load the client's classes before the
// program's. An allowed program that runs java (a launcher script, as
// many tools are) then runs code the client wrote into the roots, as
// NODE_OPTIONS does for node.
func TestAllowCommandsRefusesJavaToolOptions(t *testing.T) {
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("no javac")
	}
	tools := t.TempDir() // outside the roots: the operator's programs
	src := t.TempDir()
	write := func(dir, name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(src, "Hello.java", `public class Hello { public static void main(String[] a) { System.out.println("ok"); } }`)
	write(src, "Evil.java", `public class Evil extends ClassLoader {
  static { try { new java.io.File(System.getProperty("rv2.marker")).createNewFile(); } catch (Exception e) {} }
  public Evil(ClassLoader p) { super(p); }
}`)
	for _, f := range []string{"Hello.java", "Evil.java"} {
		if out, err := exec.Command("javac", "-d", src, filepath.Join(src, f)).CombinedOutput(); err != nil {
			t.Skipf("javac: %v %s", err, out)
		}
	}
	if err := os.Rename(filepath.Join(src, "Hello.class"), filepath.Join(tools, "Hello.class")); err != nil {
		t.Fatal(err)
	}
	launcher := write(tools, "hello", fmt.Sprintf("#!/bin/sh\nexec java -cp %s Hello\n", tools))
	h := startWith(t, fmt.Sprintf("[security]\nallow_commands = [%q]\n", launcher))
	sid := h.open()
	marker := filepath.Join(h.root, "PWNED")
	evil, err := os.ReadFile(filepath.Join(src, "Evil.class"))
	if err != nil {
		t.Fatal(err)
	}
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "evil/Evil.class", MkdirParents: true,
		Content: base64.StdEncoding.EncodeToString(evil), Encoding: protocol.EncodingBase64}, nil)
	opts := fmt.Sprintf("-Xbootclasspath/a:%s -Djava.system.class.loader=Evil -Drv2.marker=%s", filepath.Join(h.root, "evil"), marker)
	for _, name := range []string{"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"} {
		t.Run(name, func(t *testing.T) {
			m := h.with(t).call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{launcher},
				Env: map[string]string{name: opts}})
			if m.Error != nil {
				if m.Error.Code != protocol.CodeUnauthorized {
					t.Fatalf("refused with %d, want %d: %s", m.Error.Code, protocol.CodeUnauthorized, m.Error.Message)
				}
				return
			}
			var res protocol.ExecStartResult
			json.Unmarshal(m.Result, &res)
			h.with(t).exitOf(res.ProcessID, 60*time.Second)
			if _, err := os.Stat(marker); err == nil {
				os.Remove(marker)
				t.Fatalf("%s was accepted and the allowed launcher's java loaded the client's class", name)
			}
			t.Fatalf("%s was accepted; with allow_commands set it must be refused", name)
		})
	}
}
