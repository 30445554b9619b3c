package protocol

import "strings"

// CodeEnv reports whether the environment variable name changes which
// program runs (PATH) or makes a program load or run other code than its
// own: the dynamic loader's variables, the shells' start-up files,
// exported bash functions, glibc's gconv modules, IFS, the module paths and
// start-up options of the interpreters many programs in /usr/bin are
// scripts of (PYTHONWARNINGS imports the module a category names, and
// "antigravity" runs BROWSER), and the variables that name a command for a
// program to run (a pager, an editor, a browser).
//
// rexd refuses them in a request's env under allow_commands (docs/protocol.md);
// rex refuses them, among others, as names of secrets. A deny list can never
// be complete: allow only programs you would let a client drive.
func CodeEnv(name string) bool {
	switch name {
	case "PATH", "BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "GCONV_PATH",
		"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONINSPECT",
		"PYTHONWARNINGS", "PYTHONPYCACHEPREFIX",
		"PERL5LIB", "PERLLIB", "PERL5OPT", "PERL5DB", "NODE_OPTIONS", "NODE_PATH", "RUBYOPT", "RUBYLIB",
		"GEM_HOME", "GEM_PATH", "PHPRC", "PHP_INI_SCAN_DIR",
		"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
		"BROWSER", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL":
		return true
	}
	for _, p := range []string{"LD_", "DYLD_", "BASH_FUNC_", "LUA_INIT", "LUA_PATH", "LUA_CPATH"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
