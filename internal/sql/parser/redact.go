package parser

import (
	"regexp"
	"sort"
	"strings"
)

// Secrets in text that is printed (SQL options, URLs, error messages): the
// password of a user-info part ("user:PASSWORD@host"), and the value of any
// option whose name says secret, password, passwd or token, quoted
// (name='VALUE', name: "VALUE") or as a URL query parameter (?token=VALUE).
var (
	userInfoRE   = regexp.MustCompile(`(?:^|[\s'"(,=/\[])[^\s'"@/,:()=\[\]]+:([^\s'"/,()\[\]]+)@[^\s'"@/,()]`)
	secretKey    = `[A-Za-z0-9_.-]*(?i:secret|password|passwd|token)[A-Za-z0-9_.-]*`
	quotedRE     = regexp.MustCompile(secretKey + `\s*[=:]\s*(?:'((?:[^']|'')*)'|"((?:[^"\\]|\\.)*)")`)
	queryParamRE = regexp.MustCompile(`[?&]` + secretKey + `=([^&\s'"#]*)`)
)

// maskWindow is how far beyond a span maskSpan looks for a secret that
// the span cuts.
const maskWindow = 4096

// SecretName reports whether an option's name says it holds a secret.
func SecretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"secret", "password", "passwd", "token"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// secretRanges returns the sorted, disjoint byte ranges of s that hold a
// secret.
func secretRanges(s string) [][2]int {
	var rs [][2]int
	var res []*regexp.Regexp
	if strings.Contains(s, "@") {
		res = append(res, userInfoRE)
	}
	if SecretName(s) {
		res = append(res, quotedRE, queryParamRE)
	}
	for _, re := range res {
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			for g := 2; g+1 < len(m); g += 2 {
				// Already masked ('*'): left as is, so a caret line
				// redacted again keeps its columns.
				if m[g] >= 0 && m[g+1] > m[g] && strings.Trim(s[m[g]:m[g+1]], "*\t") != "" {
					rs = append(rs, [2]int{m[g], m[g+1]})
				}
			}
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// Redact replaces every secret in s with "xxx": the form for messages and
// for explain's options.
func Redact(s string) string {
	rs := secretRanges(s)
	if len(rs) == 0 {
		return s
	}
	var b strings.Builder
	at := 0
	for _, r := range rs {
		b.WriteString(s[at:r[0]])
		b.WriteString("xxx")
		at = r[1]
	}
	b.WriteString(s[at:])
	return b.String()
}

// Mask replaces each character of every secret in s with '*', keeping a tab
// as a tab, so columns (and a caret under them) stay where they were.
func Mask(s string) string { return maskSpan(s, 0, len(s)) }

// maskSpan is Mask(s)'s text for the bytes [from, to) of s: the secrets are
// found in all of s, so a span that cuts one still masks its part.
func maskSpan(s string, from, to int) string {
	// A secret is short: looking a window beyond the span is enough, and
	// keeps a caret on a huge generated line cheap.
	lo, hi := max(0, from-maskWindow), min(len(s), to+maskWindow)
	rs := secretRanges(s[lo:hi])
	if len(rs) == 0 {
		return s[from:to]
	}
	for i := range rs {
		rs[i][0] += lo
		rs[i][1] += lo
	}
	var b strings.Builder
	for i, c := range s[from:to] {
		at := from + i
		k := sort.Search(len(rs), func(k int) bool { return rs[k][1] > at })
		switch {
		case k == len(rs) || at < rs[k][0]:
			b.WriteRune(c)
		case c == '\t':
			b.WriteByte('\t')
		default:
			b.WriteByte('*')
		}
	}
	return b.String()
}
