package ir

// Suggest returns the candidate closest to s, or "" when none is close
// enough to be a plausible typo: the rule the model file's errors use
// ("did you mean"), for the command line's names too (commands, flags,
// zoo models, gate metrics), so a typo is answered alike everywhere.
func Suggest(s string, candidates []string) string { return suggest(s, candidates) }
