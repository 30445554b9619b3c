package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zalando/go-keyring"
)

const value = "ghp_s3cr3t-VALUE-0123456789"

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	var asked []bool
	ask := func(confirm bool) (string, error) { asked = append(asked, confirm); return "correct horse", nil }
	// A low scrypt work factor keeps the test fast (under -race too); the
	// file says which it was written with.
	st, err := Open(Options{Dir: dir, Backend: BackendFile, Passphrase: ask, workFactor: 10})
	if err != nil {
		t.Fatal(err)
	}
	if names, err := st.List(); err != nil || len(names) != 0 {
		t.Fatalf("empty store: %q %v", names, err)
	}
	if err := st.Set("GITHUB_TOKEN", value); err != nil {
		t.Fatal(err)
	}
	if err := st.Set("DB_PASSWORD", "p@ss word"); err != nil {
		t.Fatal(err)
	}
	// The passphrase is asked once, and confirmed because the file is new.
	if len(asked) != 1 || !asked[0] {
		t.Errorf("passphrase asked %v, want once with confirm", asked)
	}
	file := filepath.Join(dir, FileName)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte("GITHUB_TOKEN")) {
		t.Fatal("the store file holds a secret or its name in the clear")
	}
	if !bytes.HasPrefix(b, []byte("age-encryption.org/v1\n-> scrypt ")) {
		t.Errorf("not an age scrypt file: %q", b[:40])
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".secrets-") {
			t.Errorf("a temporary file was left: %s", e.Name())
		}
	}

	// A new process (a new Store) opens the same file, with the file
	// chosen even when a keyring would answer.
	keyring.MockInit()
	again, err := Open(Options{Dir: dir, Passphrase: func(bool) (string, error) { return "correct horse", nil }, workFactor: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(again.Where(), "encrypted file") {
		t.Errorf("an existing file is not the store: %s", again.Where())
	}
	if v, err := again.Get("GITHUB_TOKEN"); err != nil || v != value {
		t.Errorf("get: %q %v", v, err)
	}
	if names, _ := again.List(); strings.Join(names, ",") != "DB_PASSWORD,GITHUB_TOKEN" {
		t.Errorf("list %q", names)
	}
	if err := again.Delete("DB_PASSWORD"); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Get("DB_PASSWORD"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted secret: %v", err)
	}
	if err := again.Delete("DB_PASSWORD"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}

	// A wrong passphrase reads nothing and changes nothing.
	wrong, _ := Open(Options{Dir: dir, Backend: BackendFile, Passphrase: func(bool) (string, error) { return "wrong", nil }, workFactor: 10})
	_, err = wrong.Get("GITHUB_TOKEN")
	if err == nil || !strings.Contains(err.Error(), "the passphrase does not open "+file) {
		t.Errorf("wrong passphrase: %v", err)
	}
	if err := wrong.Set("X_TOKEN", "v"); err == nil {
		t.Error("a wrong passphrase wrote the file")
	}
	after, _ := os.ReadFile(file)
	if v, err := again.Get("GITHUB_TOKEN"); err != nil || v != value || len(after) == 0 {
		t.Errorf("after a wrong passphrase: %q %v", v, err)
	}
	// No way to ask: one sentence that says how to unlock.
	locked, _ := Open(Options{Dir: dir, Backend: BackendFile})
	_, err = locked.Get("GITHUB_TOKEN")
	if err == nil || !strings.Contains(err.Error(), "are locked: set REX_SECRETS_PASSPHRASE") {
		t.Errorf("no passphrase: %v", err)
	}
}

// TestKeyringStore runs the keyring store against go-keyring's in-memory
// mock: CI machines have no Secret Service, so the file store is the one
// the end-to-end tests use.
func TestKeyringStore(t *testing.T) {
	keyring.MockInit()
	st, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Where(), "OS keyring") {
		t.Fatalf("store %s, want the keyring when it answers and no file exists", st.Where())
	}
	for _, n := range []string{"B_TOKEN", "A_TOKEN", "B_TOKEN"} {
		if err := st.Set(n, value+n); err != nil {
			t.Fatal(err)
		}
	}
	if names, _ := st.List(); strings.Join(names, ",") != "A_TOKEN,B_TOKEN" {
		t.Errorf("list %q", names)
	}
	if v, _ := st.Get("A_TOKEN"); v != value+"A_TOKEN" {
		t.Errorf("get %q", v)
	}
	if err := st.Delete("A_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if names, _ := st.List(); strings.Join(names, ",") != "B_TOKEN" {
		t.Errorf("list after delete %q", names)
	}
	// A keyring that does not answer: the file store.
	keyring.MockInitWithError(errors.New("no D-Bus session"))
	st, err = Open(Options{Dir: t.TempDir()})
	if err != nil || !strings.Contains(st.Where(), "encrypted file") {
		t.Errorf("without a keyring: %v %v", st, err)
	}
	_, err = Open(Options{Dir: t.TempDir(), Backend: BackendKeyring})
	if err == nil || !strings.Contains(err.Error(), "no OS keyring answers") {
		t.Errorf("keyring forced without one: %v", err)
	}
}

func TestNames(t *testing.T) {
	for _, ok := range []string{"GITHUB_TOKEN", "db_password", "_X", "A1"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for name, want := range map[string]string{
		"PATH": "is refused", "path": "is refused", "LD_PRELOAD": "LD_ are reserved", "DYLD_INSERT_LIBRARIES": "DYLD_",
		"HOME": "refused", "SHELL": "refused", "USER": "refused", "LC_ALL": "LC_", "BASH_ENV": "refused", "IFS": "refused",
		"REX_PARAM_X": "REX_", "SSH_AUTH_SOCK": "SSH_", "NODE_OPTIONS": "refused", "PYTHONPATH": "refused",
		"1X": "not an environment variable name", "A-B": "not an environment variable name", "": "needs a name",
	} {
		err := CheckName(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", name, err, want)
		}
	}
	for _, v := range []string{"", "a\x00b", strings.Repeat("x", 65<<10)} {
		if CheckValue("X", v) == nil {
			t.Errorf("value of %d bytes accepted", len(v))
		}
	}
}

func TestMasker(t *testing.T) {
	values := []string{"hunter2", "hunter2-long", "abc"}
	stream := "x hunter2 y hunter2-long z ab abc hunte"
	want := "x *** y *** z ab *** hunte"
	if got := Mask(stream, values); got != want {
		t.Fatalf("Mask %q", got)
	}
	// Every way of cutting the stream into two writes masks the same.
	for i := 0; i <= len(stream); i++ {
		var out bytes.Buffer
		m := NewMasker(&out, values)
		m.Write([]byte(stream[:i]))
		m.Write([]byte(stream[i:]))
		m.Flush()
		if out.String() != want {
			t.Errorf("cut at %d: %q", i, out.String())
		}
	}
	// Nothing is held back that cannot become a value.
	var out bytes.Buffer
	m := NewMasker(&out, values)
	m.Write([]byte("line one\n"))
	if out.String() != "line one\n" {
		t.Errorf("held back %q", out.String())
	}
}

// syncBuffer is a buffer a timer may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMaskerHoldAtMost: on a terminal, what could begin a value is held
// only for a while, then shown as it is; until then a value whose rest
// arrives is still masked.
func TestMaskerHoldAtMost(t *testing.T) {
	// A hold longer than the test: the split value is masked.
	var out syncBuffer
	m := NewMasker(&out, []string{"hunter2"})
	m.HoldAtMost(time.Hour)
	m.Write([]byte("$ h"))
	if got := out.String(); got != "$ " {
		t.Fatalf("wrote %q, want the prompt without the h that may begin a value", got)
	}
	m.Write([]byte("unter2\r\n"))
	if got := out.String(); got != "$ ***\r\n" {
		t.Fatalf("wrote %q, want the value masked", got)
	}
	m.Flush()

	// A short hold: the held "h" shows by itself when nothing more comes.
	var out2 syncBuffer
	m = NewMasker(&out2, []string{"hunter2"})
	m.HoldAtMost(time.Millisecond)
	m.Write([]byte("$ h"))
	deadline := time.Now().Add(10 * time.Second)
	for out2.String() != "$ h" {
		if time.Now().After(deadline) {
			t.Fatalf("the held byte never showed: %q", out2.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FuzzMasker cuts a stream holding secret values at random points: the
// output is always the stream masked whole.
func FuzzMasker(f *testing.F) {
	f.Add("a secret b secretsecret c", "secret", uint8(3), uint8(9))
	f.Add("sssssecret", "ssecret", uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, stream, v string, a, b uint8) {
		if v == "" || strings.Contains(MaskText, v) || strings.Contains(v, "*") {
			return
		}
		i, j := int(a)%(len(stream)+1), int(b)%(len(stream)+1)
		if i > j {
			i, j = j, i
		}
		var out bytes.Buffer
		m := NewMasker(&out, []string{v})
		m.Write([]byte(stream[:i]))
		m.Write([]byte(stream[i:j]))
		m.Write([]byte(stream[j:]))
		m.Flush()
		if want := Mask(stream, []string{v}); out.String() != want {
			t.Fatalf("stream %q value %q cut %d,%d: %q, want %q", stream, v, i, j, out.String(), want)
		}
	})
}

// Every variable rexd refuses under allow_commands is refused as a secret's
// name too: a secret named PYTHONWARNINGS would run code as surely.
func TestSecretNamesRefuseWhatRexdRefuses(t *testing.T) {
	for _, name := range []string{"PYTHONWARNINGS", "PYTHONPYCACHEPREFIX", "JAVA_TOOL_OPTIONS", "LUA_INIT", "PHPRC", "BROWSER", "ld_preload"} {
		if err := CheckName(name); err == nil {
			t.Errorf("%s can be a secret's name", name)
		}
	}
}
