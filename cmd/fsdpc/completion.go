package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/plans"
)

// runCompletion prints a shell completion script: the subcommands, then
// file names (plans and model files) and zoo names for their arguments.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	const use = "usage: fsdpc completion bash|zsh|fish   (e.g. source <(fsdpc completion bash))"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintln(stdout, use)
		return 0
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, use)
		return 2
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	cmds := strings.Join(names, " ")
	zoo := strings.Join(plans.Names(), " ")
	switch args[0] {
	case "bash":
		fmt.Fprintf(stdout, `# fsdpc bash completion: source <(fsdpc completion bash)
_fsdpc() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "%s --version --help" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -W "%s" -- "$cur") $(compgen -f -- "$cur"))
}
complete -o filenames -F _fsdpc fsdpc
`, cmds, zoo)
	case "zsh":
		fmt.Fprintf(stdout, `#compdef fsdpc
# fsdpc zsh completion: source <(fsdpc completion zsh)
_fsdpc() {
	if (( CURRENT == 2 )); then
		compadd -- %s --version --help
	else
		compadd -- %s
		_files
	fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _fsdpc "$@"; else compdef _fsdpc fsdpc; fi
`, cmds, zoo)
	case "fish":
		fmt.Fprintf(stdout, "# fsdpc fish completion: fsdpc completion fish | source\n")
		for _, n := range names {
			fmt.Fprintf(stdout, "complete -c fsdpc -n __fish_use_subcommand -a %s -d %q\n", n, commands[n].summary)
		}
		fmt.Fprintf(stdout, "complete -c fsdpc -n __fish_use_subcommand -l version -d 'print the version'\n")
		fmt.Fprintf(stdout, "complete -c fsdpc -n 'not __fish_use_subcommand' -a '%s' -F\n", zoo)
	default:
		fmt.Fprintf(stderr, "fsdpc completion: unknown shell %q%s (bash, zsh or fish)\n", args[0], didYouMean(args[0], []string{"bash", "zsh", "fish"}))
		return 2
	}
	return 0
}
