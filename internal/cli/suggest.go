package cli

import (
	"fmt"
	"strings"
)

// suggest returns ` (did you mean "x"?)` for the candidate closest to name
// (the engine's rule for its own names), or "" when none is close.
func suggest(name string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := levenshtein(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > 2 && bestD*3 > len(name) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// levenshtein is the edit distance of a and b, ignoring case.
func levenshtein(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
