package chain

import (
	"fmt"
	"strings"
)

// shellQuote quotes s for a POSIX shell as one word: inside single quotes
// nothing is special, and a single quote itself is closed, escaped and
// reopened. Every value substituted into a shell string goes through it,
// whatever it contains.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellLexer follows a shell command line written by a template author far
// enough to know, where a placeholder sits, whether a single-quoted value
// stays one word there. That holds at the top level and inside $(...), and
// nowhere else: inside quotes, backquotes, arithmetic, comments and
// here-documents the quotes rex adds would be literal text or would end
// the construct early.
type shellLexer struct {
	stack     []lexFrame
	midWord   bool      // the last thing read continues a word (so # is not a comment)
	pending   []hereDoc // here-documents whose bodies start at the next newline
	body      []hereDoc // the ones being read, first first
	line      strings.Builder
	heredocOn bool

	// arith: the shell evaluates words as arithmetic in [[ -gt ]], let,
	// declare -i and array subscripts (bash, zsh, ksh and any shell rex
	// cannot tell apart from them); there a value like a[$(cmd)] runs cmd
	// whatever its quotes. dash has none of these.
	arith   bool
	intVars map[string]bool // names declared integer (declare -i x): x=VALUE is arithmetic
	err     string          // a verdict found after the placeholder (the left operand of -gt)
	// cmdErr says why a placeholder may not go where it was found: in the
	// word that names the program a simple command runs (after wrappers
	// like nohup or env too), or in shell code that eval, sh -c or an
	// interpreter runs. The value would choose what runs.
	cmdErr string
}

// arithShell says whether the shell named prog may evaluate a quoted word
// as arithmetic. Only dash is known not to: sh is bash on many systems.
func arithShell(prog string) bool { return prog != "dash" }

type lexCtx int

const (
	cxTop lexCtx = iota
	cxSubst
	cxDouble
	cxSingle
	cxAnsi
	cxBack
	cxArith
	cxComment
	cxBrace // ${...}
)

type lexFrame struct {
	ctx   lexCtx
	depth int // unmatched "(" inside $( ) or $(( )); "[" inside ${name[ ]}

	// The simple command being read (top level and $( )): its words so
	// far, the word being read (a placeholder is \x00) and what they make.
	cur     []byte
	curPH   string // a placeholder in cur whose value is not a number
	words   int
	cmd     string // the first word
	prev    string // the previous word of the command
	intDecl bool   // declare/typeset/local with -i, or ksh's integer
	nameref bool   // declare/typeset/local with -n: the value names a variable
	cond    bool   // inside [[ ]]
	condOp  string // the previous word in [[ ]] is this arithmetic operator (or -v)
	prevPH  string // the previous word in [[ ]] held this placeholder

	// args reads the words of the simple command as its program reads
	// its argv (argv.go): after nohup, env, sudo, exec, ... the program
	// is a later word, and eval, sh -c, python -c run a word as code.
	args     argScanner
	redir    bool // the next word is the target of a redirection
	afterTim bool // the previous word was the time keyword (time -p)

	// ${...}: bytes of the name, then the operator that follows it.
	nameLen int
	op      string
}

// arithOps are the operators of [[ ]] that evaluate both operands as
// arithmetic; -v evaluates the subscript of the name it tests.
var arithOps = map[string]bool{"-eq": true, "-ne": true, "-lt": true, "-le": true, "-gt": true, "-ge": true}

// cmdPrefix are the words after which a command starts.
var cmdPrefix = map[string]bool{"if": true, "then": true, "elif": true, "else": true, "while": true, "until": true, "do": true, "!": true, "{": true, "time": true}

func isDecl(cmd string) bool {
	return cmd == "declare" || cmd == "typeset" || cmd == "local" || cmd == "integer" || cmd == "readonly" || cmd == "export"
}

// assignName returns NAME when w starts NAME= or NAME+= (or NAME[).
func assignName(w string) (string, byte) {
	for i := 0; i < len(w); i++ {
		if !isNameByte(w[i], i == 0) {
			if i > 0 && (w[i] == '=' || w[i] == '[' || strings.HasPrefix(w[i:], "+=")) {
				return w[:i], w[i]
			}
			return "", 0
		}
	}
	return "", 0
}

type hereDoc struct {
	delim string
	tabs  bool // <<- strips leading tabs
}

func (l *shellLexer) top() *lexFrame {
	if len(l.stack) == 0 {
		l.stack = append(l.stack, lexFrame{ctx: cxTop})
	}
	return &l.stack[len(l.stack)-1]
}

func (l *shellLexer) push(c lexCtx) { l.stack = append(l.stack, lexFrame{ctx: c}) }

func (l *shellLexer) pop() {
	if len(l.stack) > 0 {
		l.stack = l.stack[:len(l.stack)-1]
	}
}

// noWord says why a value substituted here would not be one word, or "".
func (l *shellLexer) noWord() string {
	if l.heredocOn {
		return `inside a here-document of a shell command, where the shell expands $(...) and backquotes whatever rex quotes; pass the value as an argument ("$1") or on stdin instead`
	}
	switch l.top().ctx {
	case cxDouble, cxSingle, cxAnsi:
		return "inside quotes in a shell command, where no quoting is safe; remove the quotes around it, rex quotes substituted values itself"
	case cxBack:
		return "inside backquotes in a shell command, where a backquote in the value would end the substitution; use $(...) instead"
	case cxComment:
		return "in a comment of a shell command, where a newline in the value would end the comment and run the rest"
	}
	return ""
}

// arithWhy says where a value substituted here is evaluated as arithmetic,
// or "". Quoting does not help there: bash reads a[$(cmd)] in the value
// as an array subscript and runs cmd.
func (l *shellLexer) arithWhy() string {
	if l.heredocOn {
		return ""
	}
	f := l.top()
	if f.ctx == cxArith {
		return "inside arithmetic ($(( )) or (( )))"
	}
	if !l.arith {
		return ""
	}
	switch f.ctx {
	case cxBrace:
		if f.op == "" {
			return "in the name or subscript of a ${...} expansion"
		}
		if f.op[0] == ':' && (len(f.op) == 1 || strings.IndexByte("-=+?", f.op[1]) < 0) {
			return "in the offset or length of a ${name:offset:length} expansion"
		}
	case cxTop, cxSubst:
		w := string(f.cur)
		name, op := assignName(w)
		switch {
		case f.cond && f.condOp != "":
			return "as an operand of " + f.condOp + " inside [[ ]]"
		case f.cmd == "let" && f.words > 0:
			return "as an argument of let"
		case op == '[' && !strings.Contains(w[len(name):], "]"):
			return "inside the array subscript " + name + "[...]"
		case op != 0 && op != '[' && (l.intVars[name] || isDecl(f.cmd) && f.words > 0 && f.intDecl):
			return "in a value assigned to " + name + ", an integer variable (declare -i)"
		case op != 0 && op != '[' && isDecl(f.cmd) && f.words > 0 && f.nameref:
			return "in the variable name a nameref (declare -n) " + name + " is given"
		case (f.cmd == "unset" || f.cmd == "read") && f.words > 0:
			return "as an argument of " + f.cmd + ", which reads it as a variable name with an array subscript"
		case (f.cmd == "[" || f.cmd == "test" || f.cmd == "printf") && f.prev == "-v":
			return "after " + f.cmd + " -v, which reads it as a variable name with an array subscript"
		}
	}
	return ""
}

// word records that a quoted value was written; risky is a value that is
// not a number, named name.
func (l *shellLexer) word(name string, risky bool) {
	l.midWord = true
	if f := l.top(); f.ctx == cxTop || f.ctx == cxSubst {
		f.cur = append(f.cur, 0)
		if risky && f.curPH == "" {
			f.curPH = name
		}
	}
}

// endWord ends the word being read in a command context.
func (l *shellLexer) endWord(f *lexFrame) {
	w, ph := string(f.cur), f.curPH
	f.cur, f.curPH = f.cur[:0], ""
	if w == "" {
		return
	}
	if f.cond {
		op, prev := f.condOp, f.prevPH
		f.condOp, f.prevPH = "", ph
		switch {
		case w == "]]":
			f.cond = false
		case arithOps[w] || w == "-v":
			f.condOp = w
			if prev != "" && w != "-v" && l.arith && l.err == "" {
				l.err = fmt.Sprintf("%s sits as an operand of %s inside [[ ]]", prev, w)
			}
		case op != "":
			f.prevPH = "" // the right operand is read; what follows is a new term
		}
		f.words++
		return
	}
	if f.redir {
		f.redir = false
		return // a file or descriptor, not an argument
	}
	if f.words == 0 && (cmdPrefix[w] || f.afterTim && w == "-p") {
		f.afterTim = w == "time"
		return // a command follows
	}
	if f.words == 0 {
		if name, op := assignName(w); name != "" && (op != '[' || strings.Contains(w, "]=") || strings.Contains(w, "]+=")) {
			return // an assignment before the command: the command follows
		}
	}
	prog := f.args.prog
	if role := f.args.next(w); ph != "" && l.cmdErr == "" {
		l.cmdErr = argWhy(ph, role, prog, &f.args)
	}
	f.prev = w
	switch {
	case f.words == 0:
		f.cmd = w
		f.cond = w == "[["
		f.intDecl = w == "integer"
	case isDecl(f.cmd) && (w[0] == '-' || w[0] == '+'):
		f.intDecl = f.intDecl || strings.Contains(w, "i")
		f.nameref = f.nameref || strings.Contains(w, "n")
	case isDecl(f.cmd) && f.intDecl:
		name, _ := assignName(w + "=")
		if name != "" {
			if l.intVars == nil {
				l.intVars = map[string]bool{}
			}
			l.intVars[name] = true
		}
	}
	f.words++
}

// finish ends the word and command the template ends in.
func (l *shellLexer) finish() {
	if f := l.top(); f.ctx == cxTop {
		l.endCommand(f)
	}
}

// endCommand ends the simple command being read.
func (l *shellLexer) endCommand(f *lexFrame) {
	l.endWord(f)
	f.words, f.cmd, f.prev, f.intDecl, f.nameref, f.cond, f.condOp, f.prevPH = 0, "", "", false, false, false, "", ""
	f.args, f.redir, f.afterTim = argScanner{}, false, false
}

// argWhy says why the placeholder ph may not be a word the program prog
// (before the word was read; "" for the first word) reads as role, or "".
func argWhy(ph string, role argRole, prog string, a *argScanner) string {
	switch role {
	case roleProgram:
		if a.fam == famEval {
			return fmt.Sprintf("%s names the script %q runs as shell code, so the value would choose what runs; make it an argument of a fixed script", ph, a.prog)
		}
		if prog == "" {
			return ph + " names the program the shell runs, so the value would choose what runs; make it an argument of a fixed program"
		}
		return ph + " names the program or script that " + prog + " runs, so the value would choose what runs; make it an argument of a fixed program"
	case roleOption:
		return ph + " is an option of " + a.prog + ", which a parameter never chooses; pass it as an argument after the options"
	case roleShell:
		return ph + " is run as shell code by " + a.prog + " -c, whatever quotes rex adds; pass it after the script as an argument (sh -c '... \"$1\"' sh " + ph + ")"
	case roleCode:
		if a.fam == famEval {
			return ph + " is run as shell code by " + a.prog + ", whatever quotes rex adds; make it an argument of a fixed program instead"
		}
		return ph + " is program text of " + a.prog + ", where no quoting is safe; pass it as an argument after the program text"
	}
	return ""
}

// feed reads literal text.
func (l *shellLexer) feed(s string) {
	for i := 0; i < len(s); {
		i += l.step(s, i)
	}
}

// step reads the template text at s[i] and returns how many bytes it took
// (at least one).
func (l *shellLexer) step(s string, i int) int {
	c := s[i]
	has := func(p string) bool { return strings.HasPrefix(s[i:], p) }
	esc := 1
	if i+1 < len(s) {
		esc = 2
	}
	if l.heredocOn {
		if c != '\n' {
			l.line.WriteByte(c)
			return 1
		}
		line := l.line.String()
		l.line.Reset()
		if l.body[0].tabs {
			line = strings.TrimLeft(line, "\t")
		}
		if line == l.body[0].delim {
			l.body = l.body[1:]
			l.heredocOn = len(l.body) > 0
		}
		return 1
	}
	f := l.top()
	switch f.ctx {
	case cxSingle:
		if c == '\'' {
			l.pop()
		}
		return 1
	case cxAnsi:
		if c == '\\' {
			return esc
		}
		if c == '\'' {
			l.pop()
		}
		return 1
	case cxBack:
		if c == '\\' {
			return esc
		}
		if c == '`' {
			l.pop()
		}
		return 1
	case cxComment:
		if c == '\n' {
			l.pop()
			return l.step(s, i) // the newline ends the line in the enclosing context
		}
		return 1
	case cxArith:
		switch {
		case c == '(':
			f.depth++
		case c == ')' && f.depth == 0 && has("))"):
			l.pop()
			return 2
		case c == ')':
			f.depth--
		}
		return 1
	case cxBrace:
		switch {
		case c == '\\':
			return esc
		case c == '}' && f.depth == 0:
			l.pop()
		case c == '[' && f.op == "":
			f.depth++
		case c == ']' && f.op == "" && f.depth > 0:
			f.depth--
		case f.op == "" && f.depth == 0 && (isNameByte(c, false) || f.nameLen == 0 && strings.IndexByte("!#@*?-$", c) >= 0):
			f.nameLen++
		case f.op == "" && f.depth == 0 || len(f.op) == 1:
			f.op += string(c)
		}
		switch {
		case c == '\'':
			l.push(cxSingle)
		case c == '"':
			l.push(cxDouble)
		case has("$(("):
			l.push(cxArith)
			return 3
		case has("$("):
			l.push(cxSubst)
			return 2
		case has("${"):
			l.push(cxBrace)
			return 2
		case c == '`':
			l.push(cxBack)
		}
		return 1
	case cxDouble:
		switch {
		case c == '\\':
			return esc
		case c == '"':
			l.pop()
		case has("$(("):
			l.push(cxArith)
			return 3
		case has("$("):
			l.push(cxSubst)
			return 2
		case c == '`':
			l.push(cxBack)
		}
		return 1
	}
	// Top level or inside $( ).
	wordGoesOn := l.midWord
	l.midWord = true
	if n := l.redirection(f, s, i, wordGoesOn); n > 0 {
		return n
	}
	sep := strings.IndexByte(" \t\n;&|()<>", c) >= 0
	if sep {
		l.endWord(f)
		if !f.cond && strings.IndexByte("\n;&|()", c) >= 0 {
			l.endCommand(f)
		}
	}
	if has("((") && f.words == 0 && !wordGoesOn {
		l.push(cxArith) // the (( )) command
		return 2
	}
	switch {
	case c == '\\':
		f.cur = append(f.cur, s[i:i+esc]...)
		return esc
	case c == '\'':
		f.cur = append(f.cur, 1) // quoted text: the word is no name or operator
		l.push(cxSingle)
	case c == '"':
		f.cur = append(f.cur, 1)
		l.push(cxDouble)
	case has("$'"):
		f.cur = append(f.cur, 1)
		l.push(cxAnsi)
		return 2
	case has("$(("):
		f.cur = append(f.cur, 1)
		l.push(cxArith)
		return 3
	case has("$("):
		f.cur = append(f.cur, 1)
		l.push(cxSubst)
		return 2
	case has("${"):
		f.cur = append(f.cur, 1)
		l.push(cxBrace)
		return 2
	case c == '`':
		f.cur = append(f.cur, 1)
		l.push(cxBack)
	case c == '#' && !wordGoesOn:
		l.push(cxComment)
	case has("<<<"):
		l.midWord = false
		return 3
	case has("<<"):
		return l.hereDocOp(s, i)
	case c == '(' && f.ctx == cxSubst:
		f.depth++
		l.midWord = false
	case c == ')' && f.ctx == cxSubst:
		if f.depth == 0 {
			l.pop() // the substitution ends; the word goes on
			return 1
		}
		f.depth--
		l.midWord = false
	case c == '\n':
		l.midWord = false
		if len(l.pending) > 0 {
			l.body, l.pending = l.pending, nil
			l.heredocOn = true
		}
	case sep:
		l.midWord = false
	default:
		f.cur = append(f.cur, c)
	}
	return 1
}

// redirection reads a redirection operator at s[i] (>, >>, >|, <, <>,
// >&, <&, &>, &>>, and a descriptor number written before it) outside
// [[ ]]: the word after it names a file or descriptor and is no argument
// of the command. It returns the bytes taken, or 0. Here-documents,
// here-strings and process substitutions <( ) >( ) are read elsewhere.
func (l *shellLexer) redirection(f *lexFrame, s string, i int, wordGoesOn bool) int {
	has := func(p string) bool { return strings.HasPrefix(s[i:], p) }
	if f.cond || has("<<") || has("<(") || has(">(") {
		return 0
	}
	n := 0
	for _, op := range []string{"&>>", "&>", ">>", ">|", ">&", "<&", "<>", ">", "<"} {
		if has(op) {
			n = len(op)
			break
		}
	}
	if n == 0 {
		return 0
	}
	if wordGoesOn && len(f.cur) > 0 && strings.Trim(string(f.cur), "0123456789") == "" {
		f.cur = f.cur[:0] // 2>file: the descriptor is part of the operator
	}
	l.endWord(f)
	f.redir = true
	l.midWord = false
	return n
}

// hereDocOp reads "<<[-] WORD" at s[i] and queues the here-document.
func (l *shellLexer) hereDocOp(s string, i int) int {
	j := i + 2
	doc := hereDoc{}
	if j < len(s) && s[j] == '-' {
		doc.tabs = true
		j++
	}
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	var w strings.Builder
	var q byte
	for ; j < len(s); j++ {
		c := s[j]
		switch {
		case q != 0 && c == q:
			q = 0
		case q != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			q = c
		case c == '\\' && j+1 < len(s):
			j++
			w.WriteByte(s[j])
		case strings.IndexByte(" \t\n;&|<>()", c) >= 0:
			goto done
		default:
			w.WriteByte(c)
		}
	}
done:
	doc.delim = w.String()
	l.pending = append(l.pending, doc)
	l.midWord = false
	return j - i
}
