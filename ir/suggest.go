package ir

import "strings"

// Suggest returns the candidate closest to s, or "" when none is close
// enough to be a plausible typo: the rule the model file's errors use
// ("did you mean"), for the command line's names too (commands, flags,
// zoo models, gate metrics), so a typo is answered alike everywhere.
// Where several candidates begin with s, the one fewest edits away wins
// if only one is: "llama3-8" suggests llama3-8b, not llama3-8b-lora.
func Suggest(s string, candidates []string) string {
	if c := suggest(s, candidates); c != "" {
		return c
	}
	ls := strings.ToLower(s)
	best, bestDist, tie := "", max(2, len(s)/3+1)+1, false
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
		switch {
		case d < bestDist:
			best, bestDist, tie = c, d, false
		case d == bestDist:
			tie = true
		}
	}
	if tie || bestDist == 0 {
		return ""
	}
	return best
}
