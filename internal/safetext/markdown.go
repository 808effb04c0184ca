package safetext

import "strings"

// Markdown is s as literal Markdown text (CommonMark with GitHub's
// extensions), for a line of a pull-request comment: every character that
// could start a heading, quote, list, link, image, autolink, raw HTML,
// entity, emphasis, code span or table cell is backslash-escaped, the
// scheme separator of a bare URL and the "www." of a bare host are broken
// so GitHub does not link them, and characters Printable refuses are
// Escape'd (a line break would end the list item or table row).
func Markdown(s string) string {
	s = Escape(s)
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\', '`', '*', '[', ']', '<', '>', '!', '#', '|', '~', '&', '{', '}':
			b.WriteByte('\\')
		case '_':
			// Between two letters or digits (tok_embeddings) '_' can
			// neither open nor close emphasis; escaping it there only
			// clutters the source.
			if i == 0 || i == len(s)-1 || !alnum(s[i-1]) || !alnum(s[i+1]) {
				b.WriteByte('\\')
			}
		case ':':
			if strings.HasPrefix(s[i:], "://") {
				b.WriteByte('\\')
			}
		case '.':
			if i >= 3 && strings.EqualFold(s[i-3:i], "www") {
				b.WriteByte('\\')
			}
		case '@':
			b.WriteByte('\\') // GitHub links an e-mail address; @name mentions a user
		}
		b.WriteByte(c)
	}
	return b.String()
}

// MarkdownCode is s as a Markdown code span, which shows its content
// literally: fenced by one more backtick than the longest run of backticks
// in s, padded with a space where s starts or ends with a backtick, with
// characters Printable refuses Escape'd. It is not for a table cell, where
// GitHub splits the cell at a '|' even inside a code span.
func MarkdownCode(s string) string {
	s = Escape(s)
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if s == "" {
		return "` `"
	}
	pad := ""
	if s[0] == '`' || s[len(s)-1] == '`' || s[0] == ' ' && s[len(s)-1] == ' ' {
		pad = " "
	}
	return fence + pad + s + pad + fence
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
