package chain

import "strings"

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
}

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
)

type lexFrame struct {
	ctx   lexCtx
	depth int // unmatched "(" inside $( ) or $(( ))
}

type hereDoc struct {
	delim string
	tabs  bool // <<- strips leading tabs
}

func (l *shellLexer) top() *lexFrame {
	if len(l.stack) == 0 {
		return &lexFrame{ctx: cxTop}
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
	case cxArith:
		return `inside an arithmetic expansion of a shell command, where the shell evaluates the text; pass the number as an argument ("$1") instead`
	case cxComment:
		return "in a comment of a shell command, where a newline in the value would end the comment and run the rest"
	}
	return ""
}

// word records that a quoted value was written.
func (l *shellLexer) word() { l.midWord = true }

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
	switch {
	case c == '\\':
		return esc
	case c == '\'':
		l.push(cxSingle)
	case c == '"':
		l.push(cxDouble)
	case has("$'"):
		l.push(cxAnsi)
		return 2
	case has("$(("):
		l.push(cxArith)
		return 3
	case has("$("):
		l.push(cxSubst)
		return 2
	case c == '`':
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
	case c == ' ' || c == '\t' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '<' || c == '>':
		l.midWord = false
	}
	return 1
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
