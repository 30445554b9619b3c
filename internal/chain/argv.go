package chain

import (
	"path"
	"strings"
)

// A runtime's command is an argv, but the program it starts may read some
// of its arguments, or its stdin, as code: the argument after -c of a shell
// is a command line, the first operand of python is the script it runs,
// python with no script reads its program from stdin. argScanner follows
// an argv the way the programs rex knows parse it, so the planner can tell
// for every argument (and for stdin) what a substituted value becomes
// there, and refuse or quote it. Programs it does not know read their
// arguments as data.

// argRole is what an argument is to the program that receives it.
type argRole int

const (
	roleData    argRole = iota // plain data: substituted verbatim
	roleOption                 // an option (or an option's argument) of a shell, interpreter or wrapper
	roleProgram                // names the program, script or module that runs
	roleShell                  // a shell command line: values are single-quoted
	roleCode                   // program text for an interpreter: no quoting is safe
)

// progFamily groups programs that parse their arguments alike.
type progFamily int

const (
	famUnknown progFamily = iota
	famWrapper            // env, sudo, nice, ...: run the program named by their first operand
	famEval               // eval, ., source, trap: shell builtins that run shell code
	famShell              // sh, bash, ...
	famPython
	famNode // node, tsx, bun, deno
	famPerl
	famRuby
	famPHP
	famLua
	famRscript
	famAwk
	famSed
	famOsascript
	famPwsh
)

// family recognises a program by its base name, ignoring a version suffix
// (python3.12, lua5.4).
func family(prog string) progFamily {
	base := path.Base(prog)
	switch base {
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "rbash", "ksh93", "busybox-sh":
		return famShell
	case "env", "sudo", "doas", "nice", "nohup", "timeout", "stdbuf", "setsid", "ionice", "chrt", "taskset", "xargs", "time", "command", "exec", "builtin", "busybox":
		return famWrapper
	case "eval", ".", "source", "trap":
		return famEval
	case "awk", "gawk", "mawk", "nawk":
		return famAwk
	case "sed", "gsed":
		return famSed
	case "osascript":
		return famOsascript
	case "pwsh", "powershell":
		return famPwsh
	case "Rscript":
		return famRscript
	}
	switch strings.TrimRight(base, "0123456789.-") {
	case "python", "pypy":
		return famPython
	case "node", "nodejs", "tsx", "bun", "deno":
		return famNode
	case "perl":
		return famPerl
	case "ruby":
		return famRuby
	case "php":
		return famPHP
	case "lua", "luajit":
		return famLua
	}
	return famUnknown
}

// stdinRole is how the program reads its standard input.
type stdinRole int

const (
	stdinData    stdinRole = iota
	stdinShell             // a shell reads its commands from stdin
	stdinProgram           // an interpreter reads its program from stdin
)

// argScanner reads an argv one argument at a time.
type argScanner struct {
	fam  progFamily
	prog string // base name of the program whose arguments follow

	operands bool    // options are over: what follows are operands
	data     bool    // everything that follows is data
	pending  argRole // role of the next argument when an option awaits it
	npending int     // how many arguments options still await
	wrapSkip int     // operands a wrapper has read before the program (timeout DURATION)
	started  bool    // argv[0] has been read

	shellC, shellS bool // sh -c, sh -s
	sub            bool // deno/bun: the subcommand was read
	wrapShell      bool // sudo -s/-i: the command runs through a shell
	code           bool // the program text came from an option (-c, -e)
	script         bool // a script or module operand was given
	stdinProg      bool // the script operand is "-"
}

// next returns the role of arg (as rendered without quoting) and advances.
func (s *argScanner) next(arg string) argRole {
	if !s.started {
		s.started = true
		s.setProgram(arg)
		return roleProgram
	}
	if s.data {
		return roleData
	}
	if s.npending > 0 {
		s.npending--
		r := s.pending
		if s.npending == 0 {
			s.pending = roleOption
		}
		// python -c CODE and -m MOD end python's options.
		if s.fam == famPython && (r == roleCode || r == roleProgram) {
			s.data = true
		}
		if s.fam == famPwsh && r == roleCode {
			// pwsh -Command joins every argument after it into the command.
			s.pending, s.npending = roleCode, 1<<30
		}
		return r
	}
	isOpt := !s.operands && len(arg) > 1 && (arg[0] == '-' || s.fam == famShell && arg[0] == '+')
	switch s.fam {
	case famWrapper:
		return s.wrapper(arg, isOpt)
	case famEval:
		return s.eval(arg, isOpt)
	}
	if isOpt {
		if arg == "--" {
			s.operands = true
			return roleOption
		}
		s.option(arg)
		return roleOption
	}
	if arg == "-" && !s.operands && s.fam != famUnknown && s.fam != famAwk && s.fam != famSed {
		if s.fam == famShell {
			// "-" ends a shell's options, like "--".
			s.operands = true
		} else {
			s.stdinProg, s.data = true, true
		}
		return roleOption
	}
	return s.operand(arg)
}

// setProgram starts reading the arguments of prog.
func (s *argScanner) setProgram(prog string) {
	*s = argScanner{started: true, fam: family(prog), prog: path.Base(prog), pending: roleOption}
	if s.fam == famUnknown {
		s.data = true
	}
}

// operand handles the first argument that is not an option.
func (s *argScanner) operand(arg string) argRole {
	s.operands = true
	switch s.fam {
	case famShell:
		s.data = true
		switch {
		case s.shellC:
			return roleShell
		case s.shellS:
			return roleData
		}
		s.script = true
		return roleProgram
	case famAwk, famSed:
		s.data = true
		if s.code || s.script {
			return roleData
		}
		s.code = true
		return roleCode
	case famNode:
		if (s.prog == "deno" || s.prog == "bun") && !s.code && !s.sub {
			// deno run SCRIPT, deno eval CODE, bun run SCRIPT, bun SCRIPT
			switch arg {
			case "run", "x", "exec":
				s.sub = true
				s.operands = false
				return roleOption
			case "eval":
				s.sub, s.code = true, true
				s.pending, s.npending = roleCode, 1
				return roleOption
			}
		}
	}
	s.data = true
	if s.code {
		return roleData
	}
	s.script = true
	return roleProgram
}

// option reads an option cluster (or a long option) of the current program.
func (s *argScanner) option(arg string) {
	await := func(r argRole) {
		s.pending = r
		s.npending++
	}
	if strings.HasPrefix(arg, "--") {
		name, _, hasVal := strings.Cut(arg, "=")
		switch s.fam {
		case famShell:
			if !hasVal && (name == "--rcfile" || name == "--init-file") {
				await(roleOption)
			}
		case famNode:
			switch name {
			case "--eval", "--print":
				s.code = true
				if !hasVal {
					await(roleCode)
				}
			case "--require", "--import", "--loader", "--experimental-loader":
				if !hasVal {
					await(roleProgram)
				}
			case "--conditions", "--input-type", "--title", "--env-file", "--watch-path", "--redirect-warnings", "--stack-size":
				if !hasVal {
					await(roleOption)
				}
			}
		case famSed:
			switch name {
			case "--expression":
				s.code = true
				if !hasVal {
					await(roleCode)
				}
			case "--file":
				s.script = true
				if !hasVal {
					await(roleProgram)
				}
			case "--line-length":
				if !hasVal {
					await(roleOption)
				}
			}
		case famAwk:
			switch name {
			case "--source":
				s.code = true
				if !hasVal {
					await(roleCode)
				}
			case "--file", "--include", "--load":
				s.script = true
				if !hasVal {
					await(roleProgram)
				}
			case "--assign", "--field-separator":
				if !hasVal {
					await(roleData)
				}
			}
		case famRuby:
			if !hasVal && name == "--encoding" {
				await(roleOption)
			}
		}
		return
	}
	if s.fam == famPwsh {
		switch strings.ToLower(arg) {
		case "-c", "-command", "-encodedcommand", "-ec":
			s.code = true
			await(roleCode)
		case "-f", "-file":
			s.script = true
			await(roleProgram)
		case "-executionpolicy", "-ex", "-ep", "-workingdirectory", "-wd", "-configurationname", "-custompipename", "-settingsfile", "-inputformat", "-outputformat", "-of", "-if", "-windowstyle", "-w":
			await(roleOption)
		}
		return
	}
	// A cluster of single letters. In each family some letters take the
	// rest of the cluster, or the next argument, as their value.
	for j := 1; j < len(arg); j++ {
		c := arg[j]
		rest := arg[j+1:]
		switch s.fam {
		case famShell:
			switch {
			case c == 'c' && arg[0] == '-':
				s.shellC = true
			case c == 's' && arg[0] == '-':
				s.shellS = true
			case c == 'o' || c == 'O':
				await(roleOption)
			}
			continue
		case famPython:
			switch c {
			case 'c':
				s.code = true
				if rest == "" {
					await(roleCode)
				} else {
					s.data = true
				}
				return
			case 'm':
				s.script = true
				if rest == "" {
					await(roleProgram)
				} else {
					s.data = true
				}
				return
			case 'W', 'X', 'Q':
				if rest == "" {
					await(roleOption)
				}
				return
			}
		case famNode:
			switch c {
			case 'e', 'p':
				s.code = true
				if rest == "" {
					await(roleCode)
				}
				return
			case 'r':
				if rest == "" {
					await(roleProgram)
				}
				return
			case 'C':
				if rest == "" {
					await(roleOption)
				}
				return
			}
		case famPerl, famRuby:
			switch c {
			case 'e', 'E':
				if s.fam == famRuby && c == 'E' {
					if rest == "" {
						await(roleOption)
					}
					return
				}
				s.code = true
				if rest == "" {
					await(roleCode)
				}
				return
			case 'm', 'M', 'r':
				if rest == "" {
					await(roleProgram)
				}
				return
			case 'I', 'C', 'x', 'i', 'l', '0', 'd', 'D', 'F', 'T', 'W', 'K':
				if rest == "" && (c == 'I' || c == 'C' && s.fam == famRuby) {
					await(roleOption)
				}
				return
			}
		case famPHP:
			switch c {
			case 'r', 'B', 'R', 'F', 'E':
				s.code = true
				if rest == "" {
					await(roleCode)
				}
				return
			case 'f':
				s.script = true
				if rest == "" {
					await(roleProgram)
				}
				return
			case 'd', 'c', 'z':
				if rest == "" {
					await(roleOption)
				}
				return
			}
		case famLua:
			switch c {
			case 'e':
				s.code = true
				if rest == "" {
					await(roleCode)
				}
				return
			case 'l':
				if rest == "" {
					await(roleProgram)
				}
				return
			}
		case famRscript, famOsascript:
			if c == 'e' {
				s.code = true
				if rest == "" {
					await(roleCode)
				}
				return
			}
		case famAwk:
			switch c {
			case 'f':
				s.script = true
				if rest == "" {
					await(roleProgram)
				}
				return
			case 'e':
				s.code = true
				if rest == "" {
					await(roleCode)
				}
				return
			case 'v', 'F':
				if rest == "" {
					await(roleData)
				}
				return
			}
		case famSed:
			switch c {
			case 'e':
				s.code = true
				if rest == "" {
					await(roleCode)
				}
				return
			case 'f':
				s.script = true
				if rest == "" {
					await(roleProgram)
				}
				return
			case 'l':
				if rest == "" {
					await(roleOption)
				}
				return
			case 'i':
				return // -i[SUFFIX]
			}
		}
	}
}

// wrapper reads the arguments of env, sudo, nice, ... up to the program they
// run, which is then read as argv[0].
func (s *argScanner) wrapper(arg string, isOpt bool) argRole {
	if isOpt {
		if arg == "--" {
			s.operands = true
			return roleOption
		}
		name, _, hasVal := strings.Cut(arg, "=")
		takes := false
		switch s.prog {
		case "env":
			takes = !hasVal && (name == "-u" || name == "--unset" || name == "-C" || name == "--chdir")
			if name == "-S" || name == "--split-string" {
				// env -S splits a string into words: code of its own.
				s.pending, s.npending = roleCode, 1
				s.data = false
				return roleOption
			}
		case "sudo":
			switch name {
			case "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "-R", "-c",
				"--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--command-timeout", "--other-user", "--chroot", "--login-class":
				takes = !hasVal
			case "-s", "--shell", "-i", "--login":
				// The command runs through the target user's shell,
				// joined and escaped by sudo: no parameter goes there.
				s.wrapShell = true
			}
		case "doas":
			takes = name == "-u" || name == "-C"
		case "nice":
			takes = name == "-n" || name == "--adjustment" && !hasVal
		case "timeout":
			takes = !hasVal && (name == "-s" || name == "--signal" || name == "-k" || name == "--kill-after")
		case "stdbuf":
			takes = len(arg) == 2 && (name == "-i" || name == "-o" || name == "-e")
		case "ionice":
			takes = len(arg) == 2 && strings.ContainsRune("cnpPu", rune(arg[1]))
		case "exec":
			takes = name == "-a"
		case "command":
			if name == "-v" || name == "-V" {
				s.data = true // command -v NAME only looks the name up
			}
		case "xargs":
			switch name {
			case "-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s",
				"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var":
				takes = !hasVal
			}
		case "chrt", "taskset":
			if name == "-p" || name == "--pid" {
				s.data = true // chrt -p / taskset -p act on a process, and run none
			}
			takes = s.prog == "chrt" && !hasVal && (name == "-T" || name == "-P" || name == "-D" ||
				name == "--sched-runtime" || name == "--sched-period" || name == "--sched-deadline")
		}
		if takes {
			s.pending, s.npending = roleOption, 1
		}
		return roleOption
	}
	if s.prog == "env" && arg == "-" && !s.operands {
		return roleOption // env - is env -i
	}
	if (s.prog == "env" || s.prog == "sudo") && strings.Contains(arg, "=") && isName(arg[:strings.IndexByte(arg, '=')]) {
		return roleData // NAME=VALUE
	}
	if s.wrapSkip < wrapOperands(s.prog) {
		s.wrapSkip++
		return roleData // timeout's duration, chrt's priority, taskset's mask
	}
	if s.wrapShell {
		s.pending, s.npending = roleCode, 1<<30
		return roleCode
	}
	s.setProgram(arg)
	return roleProgram
}

// wrapOperands is how many operands a wrapper reads before the program it
// runs: timeout's duration, chrt's priority, taskset's mask.
func wrapOperands(prog string) int {
	switch prog {
	case "timeout", "chrt", "taskset":
		return 1
	}
	return 0
}

// eval reads the arguments of the shell builtins that run shell code: eval
// runs its arguments, trap its first operand when a signal comes, . and
// source the script their first operand names.
func (s *argScanner) eval(arg string, isOpt bool) argRole {
	if s.prog == "eval" {
		return roleCode
	}
	if isOpt {
		if arg == "--" {
			s.operands = true
		} else if s.prog == "trap" {
			s.data = true // trap -p, trap -l: print, run nothing
		}
		return roleOption
	}
	s.data = true
	if s.prog == "trap" {
		if arg == "-" {
			return roleData // trap - SIGNAL resets the signals
		}
		return roleCode
	}
	s.script = true
	return roleProgram
}

// stdin reports how the program reads its standard input, once every
// argument has been read.
func (s *argScanner) stdin() stdinRole {
	switch s.fam {
	case famShell:
		if s.shellC || (s.script && !s.shellS) {
			return stdinData
		}
		return stdinShell
	case famUnknown, famWrapper, famEval, famAwk, famSed:
		return stdinData
	}
	if s.stdinProg || !s.code && !s.script {
		return stdinProgram
	}
	return stdinData
}
