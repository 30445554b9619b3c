package rexd

import "testing"

// The variables that make an allowed program load or run other code, or
// name a command for it to run, are refused under allow_commands; others
// pass.
func TestRefusedEnv(t *testing.T) {
	for _, name := range []string{"PATH", "LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "BASH_FUNC_x%%", "PYTHONWARNINGS",
		"LUA_INIT", "LUA_INIT_5_4", "LUA_PATH_5_3", "LUA_CPATH", "PHPRC", "PHP_INI_SCAN_DIR", "GEM_PATH",
		"JAVA_TOOL_OPTIONS", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL", "BROWSER"} {
		if !refusedEnv(name) {
			t.Errorf("%s is allowed under allow_commands", name)
		}
	}
	for _, name := range []string{"LANG", "TERM", "HOME_DIR", "MY_PATH", "TZ", "GIT_AUTHOR_NAME"} {
		if refusedEnv(name) {
			t.Errorf("%s is refused under allow_commands", name)
		}
	}
}
