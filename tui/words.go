package tui

import (
	"errors"
	"strings"
)

// splitWords splits a slash command's arguments as a POSIX shell splits
// words, without expanding anything: blanks separate words; '...' keeps
// everything literally; "..." keeps everything but \" and \\; a backslash
// outside quotes keeps the next character. So
//
//	/run web -- 'df -h | grep /data'
//
// passes one command word, which rex run then runs through sh -c.
func splitWords(s string) ([]string, error) {
	var words []string
	var b strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		case '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("a ' quote is not closed; close it or escape it as \\'")
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("a \" quote is not closed; close it or escape it as \\\"")
			}
		case '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			} else {
				b.WriteByte(c)
			}
		default:
			inWord = true
			b.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, b.String())
	}
	return words, nil
}
