package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// secretsEnv is the file-backed secret store (CI has no Secret Service).
var secretsEnv = []string{"REX_SECRETS_BACKEND=file", "REX_SECRETS_PASSPHRASE=correct horse battery"}

// setSecret stores a secret through `rex secret set`, the value on stdin.
func (f *sshFleet) setSecret(t *testing.T, name, value string) {
	t.Helper()
	out, errOut, code := f.runIn(f.home, value+"\n", secretsEnv, "secret", "set", name)
	if code != 0 || !strings.Contains(out, "stored "+name) {
		t.Fatalf("secret set %s: %d %q %q", name, code, out, errOut)
	}
}

// declareSecrets sets a device's "secrets" in the registry.
func (f *sshFleet) declareSecrets(t *testing.T, device string, names ...string) {
	t.Helper()
	var reg map[string]any
	b, err := os.ReadFile(f.registry())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Fatal(err)
	}
	reg["devices"].(map[string]any)[device].(map[string]any)["secrets"] = names
	b, _ = json.Marshal(reg)
	if err := os.WriteFile(f.registry(), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// noValueUnder fails the test for every regular file under dir that holds
// one of the values.
func noValueUnder(t *testing.T, dir string, values ...string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a secret's value", p)
			}
		}
		return nil
	})
}

// TestDeviceSecretsInRun: a device's secrets reach every process rex
// starts on it, not only tool runs: `rex run` (argv and shell commands,
// every output mode) gets them as environment and prints their echoes as
// ***; the host's home (rexd's cache and audit log included) and rex's own
// files hold no value; the audit log records the exec with the names and
// <redacted>. A device that names a secret nobody set fails in one
// sentence, and its command does not run.
func TestDeviceSecretsInRun(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	const value = "s3cret-DB-pass-91ac07e"
	f.setSecret(t, "DB_PASSWORD", value)
	f.declareSecrets(t, "h1", "DB_PASSWORD")
	sum, _ := exec.Command("sh", "-c", "printf '%s' '"+value+"' | cksum").Output()
	cksum := strings.TrimSpace(string(sum))

	// argv: several words, no shell on rex's side.
	out, errOut, code := f.runIn(f.home, "", secretsEnv, "run", "good", "--", "sh", "-c",
		`echo "db=$DB_PASSWORD"; echo "err=$DB_PASSWORD" >&2; printf '%s' "$DB_PASSWORD" | cksum`)
	if code != 0 {
		t.Fatalf("rex run: %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"h1: db=***\n", "h1! err=***\n", "h1: " + cksum + "\n", "h2: db=\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("rex run output lacks %q (the secret did not arrive, reached the wrong host, or was not masked):\n%s", want, out)
		}
	}
	// One word with shell syntax runs through sh -c on the host.
	out, errOut, code = f.runIn(f.home, "", secretsEnv, "run", "h1", `echo "shell=$DB_PASSWORD"`)
	if code != 0 || !strings.Contains(out, "h1: shell=***\n") {
		t.Errorf("a shell command: %d\n%s%s", code, out, errOut)
	}
	jout, jerr, code := f.runIn(f.home, "", secretsEnv, "run", "h1", "--json", "--", "sh", "-c", `echo "$DB_PASSWORD"`)
	if code != 0 || !strings.Contains(jout, `"data":"***\n"`) {
		t.Errorf("--json: %d %s %s", code, jout, jerr)
	}
	gout, gerr, code := f.runIn(f.home, "", secretsEnv, "run", "good", "--gather", "--", "sh", "-c", `echo "$DB_PASSWORD"`)
	if code != 0 || !strings.Contains(gout, "***") {
		t.Errorf("--gather: %d %s %s", code, gout, gerr)
	}
	outdir := filepath.Join(t.TempDir(), "out")
	if _, oerr, code := f.runIn(f.home, "", secretsEnv, "run", "h1", "--outdir", outdir, "--", "sh", "-c", `echo "$DB_PASSWORD"`); code != 0 {
		t.Errorf("--outdir: %d %s", code, oerr)
	} else if b, _ := os.ReadFile(filepath.Join(outdir, "h1.out")); string(b) != "***\n" {
		t.Errorf("--outdir wrote %q", b)
	}
	for what, text := range map[string]string{"output": out + errOut, "--json output": jout + jerr, "--gather output": gout + gerr} {
		if strings.Contains(text, value) {
			t.Errorf("the secret's value is in rex run's %s", what)
		}
	}

	audit := filepath.Join(f.hostHome("h1"), ".local", "state", "rexd", "audit.log")
	if b, err := os.ReadFile(audit); err != nil || !bytes.Contains(b, []byte(`"exec.start"`)) || !bytes.Contains(b, []byte(`"DB_PASSWORD":"\u003credacted\u003e"`)) {
		t.Errorf("rexd's audit log %s does not record the exec with the secret redacted: %v\n%s", audit, err, b)
	}
	noValueUnder(t, f.hostHome("h1"), value)
	noValueUnder(t, f.hostHome("h2"), value)
	noValueUnder(t, f.home, value)

	// A secret the device names that is not set: one sentence for that
	// device; the command does not run there, and runs on the others.
	f.declareSecrets(t, "h1", "DB_PASSWORD", "NOT_SET")
	marker := filepath.Join(f.hostHome("h1"), "ran")
	out, errOut, code = f.runIn(f.home, "", secretsEnv, "run", "good", "--", "sh", "-c", "touch ran; echo ran")
	if code == 0 || !strings.Contains(errOut, "h1! device h1 needs the secret NOT_SET, which is not set; set it with: rex secret set NOT_SET") ||
		!strings.Contains(out, "h2: ran") {
		t.Errorf("a missing secret: %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran on h1 without its secret")
	}
}

// TestAttachGetsDeviceSecrets: `rex attach` on a device with secrets
// opens its terminal with them in the environment, and an echo of a
// value shows as ***.
func TestAttachGetsDeviceSecrets(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	const value = "attach-T0ken-5e21b9"
	f.setSecret(t, "API_TOKEN", value)
	f.declareSecrets(t, "h1", "API_TOKEN")
	s := newTmux(t, 100, 30)
	s.line("export HOME=" + f.home + " XDG_CONFIG_HOME= XDG_CACHE_HOME= XDG_STATE_HOME= " + strings.Join(secretsEnv[:1], " ") + " REX_SECRETS_PASSPHRASE='correct horse battery'")
	s.line("rex attach h1; echo status=$?")
	s.line(`export PS1='REMOTE> '; echo "tok=$API_TOKEN len=${#API_TOKEN}"`)
	scr := s.waitFor("the token's echo", func(scr string) bool { return hasLine(scr, "tok=*** len="+strconv.Itoa(len(value))) })
	if strings.Contains(scr, value) {
		t.Fatalf("the terminal shows the value:\n%s", scr)
	}
	s.line("exit 0")
	s.waitFor("status=0", func(scr string) bool { return hasLine(scr, "status=0") })
	noValueUnder(t, f.hostHome("h1"), value)
}
