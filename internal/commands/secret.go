package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/term"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/secrets"
)

// SecretUsage is the synopsis of `rex secret`.
const SecretUsage = `usage:
  rex secret set NAME      the value is typed (echo off) or read from stdin, never from the command line
  rex secret list
  rex secret rm NAME`

// SecretStore opens the operator's secret store once per App. The
// encrypted file's passphrase comes from REX_SECRETS_PASSPHRASE, else from
// App.AskSecretPassphrase (the CLI asks on the terminal; the console, which
// owns the screen, does not).
func (app *App) SecretStore() (secrets.Store, error) {
	app.secretsOnce.Do(func() {
		ask := func(confirm bool) (string, error) {
			if p := os.Getenv(secrets.PassphraseEnv); p != "" {
				return p, nil
			}
			if app.AskSecretPassphrase == nil {
				return "", fmt.Errorf("the secrets file is locked: set %s (the console cannot ask for it)", secrets.PassphraseEnv)
			}
			return app.AskSecretPassphrase(confirm)
		}
		app.secrets, app.secretsErr = secrets.Open(secrets.Options{Dir: app.ConfigDir, Backend: os.Getenv(secrets.BackendEnv), Passphrase: ask})
	})
	return app.secrets, app.secretsErr
}

// AskSecretPassphrase reads the secrets file's passphrase on the
// controlling terminal, echo off, twice when the file is being created.
func AskSecretPassphrase(confirm bool) (string, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("the secrets file is locked and there is no terminal to ask for its passphrase; set %s", secrets.PassphraseEnv)
	}
	defer tty.Close()
	read := func(prompt string) (string, error) {
		fmt.Fprint(tty, prompt)
		b, err := term.ReadPassword(int(tty.Fd()))
		fmt.Fprintln(tty)
		return string(b), err
	}
	if confirm {
		fmt.Fprintln(tty, "rex keeps secrets in a file encrypted with a passphrase (no OS keyring answers here).")
	}
	p, err := read("Passphrase for rex's secrets: ")
	if err != nil || !confirm {
		return p, err
	}
	again, err := read("Again, to confirm: ")
	if err != nil {
		return "", err
	}
	if again != p {
		return "", errors.New("the two passphrases differ; nothing was stored")
	}
	return p, nil
}

// Secret is `rex secret ARGS...`.
func Secret(app *App, o IO, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprintln(o.Out, SecretUsage)
		return nil
	}
	switch args[0] {
	case "set":
		if len(args) != 2 {
			return secretSetArgs(args[1:])
		}
		return SecretSet(app, o, args[1])
	case "list", "ls":
		if len(args) != 1 {
			return Usagef("rex secret list takes no arguments")
		}
		return SecretList(app, o)
	case "rm", "remove", "delete":
		if len(args) != 2 {
			return Usagef("which secret? usage: rex secret rm NAME")
		}
		return SecretRemove(app, o, args[1])
	}
	return Usagef("unknown secret verb %q\n%s", args[0], SecretUsage)
}

// secretSetArgs explains a wrong `rex secret set` line, above all a value
// given on the command line.
func secretSetArgs(args []string) error {
	if len(args) == 0 {
		return Usagef("which secret? usage: rex secret set NAME")
	}
	return Usagef("rex secret set takes only the NAME: a value on the command line would stay in shell history and be visible in ps; type it when asked, or pipe it on stdin")
}

// SecretSet is `rex secret set NAME`: the value comes from the terminal
// (echo off) when stdin is one, else from stdin (one trailing newline
// dropped).
func SecretSet(app *App, o IO, name string) error {
	if err := secrets.CheckName(name); err != nil {
		return err
	}
	value, err := readSecretValue(o.In, name)
	if err != nil {
		return err
	}
	if err := secrets.CheckValue(name, value); err != nil {
		return err
	}
	st, err := app.SecretStore()
	if err != nil {
		return err
	}
	if err := st.Set(name, value); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "stored %s in %s\n", name, st.Where())
	return nil
}

func readSecretValue(in io.Reader, name string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(os.Stderr, "Value for %s: ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(os.Stderr)
		return string(b), err
	}
	if in == nil {
		return "", fmt.Errorf("no value for %s: type it in a terminal or pipe it on stdin", name)
	}
	b, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read the value of %s: %w", name, err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return string(b), nil
}

// SecretList is `rex secret list`: names only, never values.
func SecretList(app *App, o IO) error {
	st, err := app.SecretStore()
	if err != nil {
		return err
	}
	names, err := st.List()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		fmt.Fprintf(o.Out, "no secrets in %s; add one with: rex secret set NAME\n", st.Where())
		return nil
	}
	for _, n := range names {
		fmt.Fprintln(o.Out, n)
	}
	fmt.Fprintf(o.Err, "%d secret(s) in %s\n", len(names), st.Where())
	return nil
}

// SecretRemove is `rex secret rm NAME`.
func SecretRemove(app *App, o IO, name string) error {
	if err := secrets.CheckName(name); err != nil {
		return err
	}
	st, err := app.SecretStore()
	if err != nil {
		return err
	}
	if err := st.Delete(name); err != nil {
		if errors.Is(err, secrets.ErrNotFound) {
			return fmt.Errorf("there is no secret %s in %s; nothing was removed (rex secret list shows the names)", name, st.Where())
		}
		return err
	}
	fmt.Fprintf(o.Out, "removed %s from %s\n", name, st.Where())
	return nil
}

// DeviceSecrets is the environment every process rex starts on t gets
// from its device: the secrets it declares ("secrets": [NAMES] in
// devices.json) with their values, by name. Nothing for local, ad-hoc
// hosts and devices that declare none. It is fanout.PoolOptions.Secrets
// for the pools of every front end, so plain commands, terminals and the
// agent's tools get the same as tool runs (which add their own).
func (app *App) DeviceSecrets(_ context.Context, t fanout.Target) (map[string]string, error) {
	names, err := deviceSecrets(t)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	return secretValues(app, "device "+t.Name, names)
}

// deviceSecrets reads the secrets a device declares ("secrets": [NAMES]
// in devices.json) for the processes rex starts on it.
func deviceSecrets(t fanout.Target) ([]string, error) {
	spec := t.Spec
	if su, ok := spec.(SudoSpec); ok {
		spec = su.Target // a device with become, or --sudo
	}
	dt, ok := spec.(devices.Target)
	if !ok || dt.Device == nil {
		return nil, nil
	}
	raw, ok := dt.Device.Extra()["secrets"]
	if !ok {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		return nil, fmt.Errorf("device %s: secrets must be a list of names, like [\"GITHUB_TOKEN\"]", t.Name)
	}
	for _, n := range names {
		if err := secrets.CheckName(n); err != nil {
			return nil, fmt.Errorf("device %s: %w", t.Name, err)
		}
	}
	return names, nil
}

// secretValues fetches the values of names, failing with the first that is
// missing and what to do about it.
func secretValues(app *App, needBy string, names []string) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	st, err := app.SecretStore()
	if err != nil {
		return nil, err
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		if _, done := out[n]; done {
			continue
		}
		v, err := st.Get(n)
		if errors.Is(err, secrets.ErrNotFound) {
			return nil, fmt.Errorf("%s needs the secret %s, which is not set; set it with: rex secret set %s", needBy, n, n)
		}
		if err != nil {
			return nil, err
		}
		out[n] = v
	}
	return out, nil
}

// valuesOf lists a secret map's values, for masking.
func valuesOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// joinNames is "A, B and C".
func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
