package secrets

import (
	"bytes"
	"strings"
	"testing"
)

// A terminal's output has each newline as CR LF (the pty's ONLCR): a
// multi-line secret (a PEM key, a certificate; values up to 64 KiB are
// accepted) printed in a terminal pane must still show as ***.
func TestMaskerMultilineSecretInTerminalOutput(t *testing.T) {
	secret := "-----BEGIN KEY-----\nMIIEsecretline1\nMIIEsecretline2\n-----END KEY-----"
	var out bytes.Buffer
	m := NewMasker(&out, []string{secret})
	// What a pty sends for `echo "$KEY"`.
	m.Write([]byte(strings.ReplaceAll(secret, "\n", "\r\n") + "\r\n"))
	m.Flush()
	if strings.Contains(out.String(), "secretline") {
		t.Fatalf("a multi-line secret printed in a terminal shows unmasked: %q", out.String())
	}
	if got := Mask("x "+strings.ReplaceAll(secret, "\n", "\r\n"), []string{secret}); strings.Contains(got, "secretline") {
		t.Fatalf("Mask leaves a CR LF copy of a multi-line secret: %q", got)
	}
}
