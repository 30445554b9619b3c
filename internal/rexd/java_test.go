package rexd_test

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAllowCommandsRefusesJavaToolOptions: the JVM reads
// JAVA_TOOL_OPTIONS (and _JAVA_OPTIONS, JDK_JAVA_OPTIONS) as options of
// every java it starts: -javaagent, -Xbootclasspath/a or
// -Djava.system.class.loader load the client's classes before the
// program's, so an allowed program that runs java (a launcher script, as
// many tools are) would run code the client wrote into the roots. The
// request is refused before anything starts, so no JVM is needed here.
func TestAllowCommandsRefusesJavaToolOptions(t *testing.T) {
	allowed, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	h := startWith(t, fmt.Sprintf("[security]\nallow_commands = [%q]\n", allowed))
	sid := h.open()
	for _, name := range []string{"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"} {
		t.Run(name, func(t *testing.T) {
			m := h.with(t).call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{allowed},
				Env: map[string]string{name: "-Xbootclasspath/a:evil -Djava.system.class.loader=Evil"}})
			if m.Error == nil || m.Error.Code != protocol.CodeUnauthorized {
				t.Fatalf("%s under allow_commands: %+v; want it refused (%d)", name, m.Error, protocol.CodeUnauthorized)
			}
		})
	}
}
