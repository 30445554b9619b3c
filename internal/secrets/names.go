package secrets

import (
	"fmt"
	"strings"

	"github.com/rexconsole/rex/internal/protocol"
)

// A secret reaches a process as one environment variable, so its name is a
// variable name, and never one that changes how programs start, find their
// libraries or who they think they are: a secret named PATH or LD_PRELOAD
// would be a way to run other code, one named HOME or USER a way to lie to
// it. Every name rexd refuses in exec.start's env when allow_commands is
// set (protocol.CodeEnv) is refused, and more: this list is wider on
// purpose.

// reservedExact are refused as they are.
func reservedExact(name string) bool {
	switch name {
	case "PATH", "HOME", "SHELL", "USER", "LOGNAME", "USERNAME", "PWD", "OLDPWD", "TERM", "TZ",
		"LANG", "LANGUAGE", "MAIL", "HOSTNAME", "TMPDIR", "EDITOR", "VISUAL", "PAGER",
		"IFS", "ENV", "BASH_ENV", "CDPATH", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND",
		"SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "HISTFILE", "INPUTRC",
		"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONUSERBASE",
		"NODE_OPTIONS", "NODE_PATH", "PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYOPT", "RUBYLIB",
		"GCONV_PATH", "HOSTALIASES", "RESOLV_HOST_CONF", "LOCALDOMAIN", "NLSPATH",
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "SSH_ASKPASS", "SUDO_ASKPASS":
		return true
	}
	return false
}

// reservedPrefixes are refused with anything after them.
func reservedPrefixes() []string {
	return []string{"LD_", "DYLD_", "LC_", "SSH_", "SUDO_", "XDG_", "REX_", "BASH_FUNC_", "GIT_CONFIG"}
}

// Reserved reports whether name may not be a secret, and why.
func Reserved(name string) (string, bool) {
	upper := strings.ToUpper(name)
	if reservedExact(upper) {
		return fmt.Sprintf("%s is an environment variable that programs rely on", name), true
	}
	for _, p := range reservedPrefixes() {
		if strings.HasPrefix(upper, p) {
			return fmt.Sprintf("names starting with %s are reserved", p), true
		}
	}
	if protocol.CodeEnv(upper) {
		return fmt.Sprintf("%s makes programs load or run other code", name), true
	}
	return "", false
}

// maxNameLen bounds a secret's name.
const maxNameLen = 128

// CheckName reports whether name can be a secret: a variable name
// (letters, digits and '_', not starting with a digit) that is not
// reserved. The error is one sentence that says what to do.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("a secret needs a name, like GITHUB_TOKEN")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("secret name %.20q… is longer than %d characters", name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("secret name %q is not an environment variable name; use letters, digits and '_', like GITHUB_TOKEN", name)
		}
	}
	if why, ok := Reserved(name); ok {
		return fmt.Errorf("secret name %s is refused: %s; choose another name", name, why)
	}
	return nil
}
