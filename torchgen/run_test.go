package torchgen

import (
	"strings"
	"testing"
)

// Without a torch, the message says what to install.
func TestFindPythonSaysWhatToInstall(t *testing.T) {
	t.Setenv("FSDPC_TORCH_ROOT", t.TempDir())
	_, err := FindPython("")
	if err == nil || !strings.Contains(err.Error(), ".ci/install-torch") || !strings.Contains(err.Error(), "--python") {
		t.Errorf("got %v", err)
	}
	if _, err := FindPython("/nonexistent/python3"); err == nil || !strings.Contains(err.Error(), "--python /nonexistent/python3") {
		t.Errorf("a missing --python: got %v", err)
	}
}
